"""``--exclude-all-private``: never connect to private, loopback or link-local addresses.

Checked after DNS resolution, so a public name that points at an internal
address is caught as well as an IP literal: ``crawler.net.resolver`` wraps
aiohttp's resolver with these checks and guards every request the fetcher
sends; ``scope`` checks literals too with ``is_private_host``, so a link is
recorded as excluded without a request. An IPv6 address that carries an IPv4
one (mapped, 6to4, NAT64) is classified by the IPv4 address. No aiohttp
here: the parse helpers import this module.
"""

from __future__ import annotations

import ipaddress

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Allowed = tuple[Network, ...]
IP = ipaddress.IPv4Address | ipaddress.IPv6Address
# NAT64's well-known prefix: the last 32 bits are the IPv4 address reached.
NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
# An allowed network this wide (a /7 or wider) reaches most of the Internet's
# private space at once: ``0.0.0.0/0`` turns the guard off, so it is refused.
MIN_ALLOWED_PREFIX = {4: 8, 6: 16}


class PrivateAddressError(OSError):
    """A target resolved to an address the crawl may not reach."""


def parse_networks(entries: list[str]) -> Allowed:
    """``--allow-network`` values ("10.1.0.0/16", "192.168.1.7") as networks."""
    return tuple(ipaddress.ip_network(entry.strip(), strict=False) for entry in entries)


def check_network(entry: str) -> Network:
    """One ``--allow-network`` value, refused (ValueError) when it is too wide to mean it.

    ``0.0.0.0/0`` would switch the guard off without a word; whoever wants
    that says ``--allow-private`` instead.
    """
    network = ipaddress.ip_network(entry.strip(), strict=False)
    widest = MIN_ALLOWED_PREFIX[network.version]
    if network.prefixlen < widest:
        raise ValueError(
            f"{entry.strip()} is wider than /{widest}, which would switch the "
            "private-address guard off; name the private networks to reach, or turn the "
            "guard off openly (crawler serve --allow-private; crawler crawl without -E)"
        )
    return network


def embedded_ipv4(ip: IP) -> IP:
    """The IPv4 address an IPv6 address carries (mapped, 6to4 ``2002::/16``, NAT64),
    which is where a packet to it ends up; any other address unchanged."""
    if isinstance(ip, ipaddress.IPv4Address):
        return ip
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip


def ip_literal(host: str) -> IP | None:
    """The address ``host`` spells (an IPv6 zone id left out), or None for a name."""
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None


def is_private_address(address: str, allowed: Allowed = ()) -> bool:
    """Not public (private, shared, loopback, link-local, reserved, multicast,
    unspecified) and not in an allowed network."""
    literal = ip_literal(address)
    if literal is None:
        return False
    ip = embedded_ipv4(literal)
    if any(ip in network for network in allowed):
        return False
    return bool(
        not ip.is_global
        or ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_reserved
        or ip.is_multicast
        or ip.is_unspecified
    )


def is_private_host(host: str, allowed: Allowed = ()) -> bool:
    """Is this authority an IP literal that is not public? (Names go to the resolver.)"""
    name = host
    if name.startswith("["):
        name = name[1 : name.find("]")]
    elif name.count(":") == 1:
        name = name.rsplit(":", 1)[0]
    return is_private_address(name, allowed)
