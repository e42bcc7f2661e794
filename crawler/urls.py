"""The one canonicalizer: resolve links as browsers do, turn URLs into dedup keys.

Two steps, kept apart on purpose:

* ``resolve`` follows the WHATWG URL standard, so that a link means here what
  it means in a browser: the same whitespace stripping, backslashes, relative
  references, IDNA hosts, IPv4 forms and, for the query only, the document's
  own encoding.
* ``normalize`` turns an absolute http(s) URL into the crawl's dedup key: the
  WHATWG parse plus RFC 3986 section 6 normalization (case, percent-encoding,
  default port, trailing dot, empty query). Every spelling of one resource maps
  to one key, and a key normalizes to itself.

Everything here is pure string work on the crawl's hot path: regexes are
compiled once, a page's base URL is parsed once for all its links, and URLs
that are already canonical take a single regex match.
"""

from __future__ import annotations

import codecs
import functools
import ipaddress
import re
from typing import NamedTuple
from urllib.parse import unquote, unquote_to_bytes

import idna

from crawler.errors import InvalidURLError

MAX_URL_CHARS = 64 * 1024  # longer URLs are refused: no server accepts them
DEFAULT_PORTS = {"http": "80", "https": "443"}

_C0_AND_SPACE = "".join(map(chr, range(0x21)))
_TAB_OR_NEWLINE = re.compile("[\t\n\r]")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
_AUTHORITY_END = re.compile(r"[/\\?#]")
_LABEL_DOTS = re.compile("[.\u3002\uff0e\uff61]")  # the dots IDNA splits labels on
_FORBIDDEN_DOMAIN = re.compile(r"[\x00-\x20#%/:<>?@\[\\\]^|\x7f]")
_MAX_DNS_LABEL = 63
_MAX_LABEL_CHARS = 253  # longer non-ASCII labels are refused before IDNA work
_DIGITS = frozenset("0123456789")
_OCTAL = frozenset("01234567")
_HEXDIGITS = frozenset("0123456789abcdefABCDEF")
_SINGLE_DOT = frozenset({".", "%2e", "%2E"})
_DOUBLE_DOT = frozenset(a + b for a in _SINGLE_DOT for b in _SINGLE_DOT)
_HEX = [f"%{i:02X}" for i in range(256)]

# WHATWG percent-encode sets, as "characters to encode" (runs of them), each
# written as the complement of the printable ASCII it leaves alone: the same
# sets (C0 controls and everything past "~" included), but a class spanning
# U+007F-U+10FFFF took the re compiler ~10 ms per pattern, paid by every start.
# tests/test_urls.py holds each against the standard's definition.
_PATH_SET = re.compile(r"[^!$-;=@-_a-z|~]+")  # C0, space " # < > ? ` { }
_QUERY_SET = re.compile(r"[^!$-&(-;=?-~]+")  # special-query (http(s)): C0, space " # < > '
_FRAGMENT_SET = re.compile(r"[^!#-;=?-_a-~]+")  # C0, space " < > `
_USERINFO_SET = re.compile(r"[^!$-.0-9A-Z_a-z~]+")  # path's, and / : ; = @ [ \ ] ^ |
_QUERY_ASCII_SET = frozenset(b"\"#<>'" + bytes(range(0x21)) + b"\x7f")

# RFC 3986 canonical form: an escape, or a run of characters outside the
# component's allowed set (unreserved, sub-delims, the component's extras, "%").
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_CANON_PATH = re.compile(r"%[0-9A-Fa-f]{2}|[^A-Za-z0-9\-._~!$&'()*+,;=:@/%]+")
_CANON_QUERY = re.compile(r"%[0-9A-Fa-f]{2}|[^A-Za-z0-9\-._~!$&()*+,;=:@/?%]+")  # ' escaped
_CANON_FRAGMENT = re.compile(r"%[0-9A-Fa-f]{2}|[^A-Za-z0-9\-._~!$&'()*+,;=:@/?%]+")
_CANON_USERINFO = re.compile(r"%[0-9A-Fa-f]{2}|[^A-Za-z0-9\-._~!$&'()*+,;=:%]+")
_STRAY_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")

# Already canonical http(s) URLs (the common case) skip the full parse. The
# checks in ``_is_canonical`` exclude what this pattern lets through but the
# slow path would still change.
_CANONICAL = re.compile(
    r"(https?)://([a-z0-9\-]+(?:\.[a-z0-9\-]+)*+)(?::([1-9][0-9]{0,4}))?"
    r"(/(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/]|%[0-9A-F]{2})*+)"
    r"(?:\?(?:[A-Za-z0-9\-._~!$&()*+,;=:@/?]|%[0-9A-F]{2})++)?"
    r"(?:#(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?]|%[0-9A-F]{2})*+)?\Z"
)
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_DOTTED_QUAD = re.compile(rf"{_OCTET}(?:\.{_OCTET}){{3}}\Z")
_ESCAPED_UNRESERVED = re.compile(r"%(?:3[0-9]|4[1-9A-F]|5[0-9A]|6[1-9A-F]|7[0-9A]|2D|2E|5F|7E)")

# WHATWG encoding names whose Python codec has another name or is narrower.
_PYTHON_CODECS = {
    "windows-874": "cp874",
    "x-mac-cyrillic": "mac-cyrillic",
    "shift_jis": "cp932",
    "euc-kr": "cp949",
    "big5": "big5hkscs",
}


class _Parts(NamedTuple):
    """A parsed http(s) URL, each part already in WHATWG serialized form."""

    scheme: str
    userinfo: str  # "" when absent
    host: str
    port: str  # "" when absent or the scheme's default
    path: str  # always starts with "/"
    query: str | None
    fragment: str | None


def _canonical_escapes() -> dict[str, str]:
    """Every spelling of every escape mapped to its canonical form."""
    table = {}
    for i in range(256):
        high, low = f"{i:02X}"[0], f"{i:02X}"[1]
        canonical = chr(i) if chr(i) in _UNRESERVED else f"%{high}{low}"
        for h in (high, high.lower()):
            for lo in (low, low.lower()):
                table[f"%{h}{lo}"] = canonical
    return table


_CANON_ESCAPES = _canonical_escapes()


def _utf8_escaped(match: re.Match[str]) -> str:
    """Percent-encode a run of characters as UTF-8."""
    return "".join([_HEX[b] for b in match.group().encode("utf-8")])


def _canonical_piece(match: re.Match[str]) -> str:
    """Canonicalize one escape, or percent-encode a run of disallowed characters."""
    piece = match.group()
    return _CANON_ESCAPES.get(piece) or _utf8_escaped(match)


def _uppercased_piece(match: re.Match[str]) -> str:
    """Like ``_canonical_piece`` but never decodes (a stray "%" is nearby)."""
    piece = match.group()
    return piece.upper() if piece[0] == "%" else _utf8_escaped(match)


def _canonical(pattern: re.Pattern[str], text: str) -> str:
    """RFC 3986 canonical percent-encoding of one component.

    Decoding is skipped when the component holds a stray "%": decoding "%61"
    in "%%61b" would forge a new escape "%ab" and break idempotence.
    """
    if _STRAY_PERCENT.search(text):
        return pattern.sub(_uppercased_piece, text)
    return pattern.sub(_canonical_piece, text)


def _clean(raw: str) -> str:
    """WHATWG input cleanup: strip C0 and spaces, drop tabs and newlines, fix surrogates."""
    text = raw.strip(_C0_AND_SPACE)
    if "\t" in text or "\n" in text or "\r" in text:
        text = _TAB_OR_NEWLINE.sub("", text)
    if not text.isascii():
        # Lone surrogates cannot be encoded; browsers see U+FFFD there.
        text = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text


def _check_length(text: str) -> None:
    if len(text) > MAX_URL_CHARS:
        raise InvalidURLError(f"URL longer than {MAX_URL_CHARS} characters")


@functools.lru_cache(maxsize=64)
def _python_codec(encoding: str) -> str:
    """The Python codec for a document encoding; UTF-8 for the UTF-16/32 family."""
    name = _PYTHON_CODECS.get(encoding.lower(), encoding)
    try:
        name = codecs.lookup(name).name
        "a".encode(name)  # refuses bytes-to-bytes codecs such as "hex"
    except (LookupError, ValueError):  # ValueError: a NUL in the name
        return "utf-8"
    return "utf-8" if name.startswith("utf") else name


def _encode_query_run(codec: str, match: re.Match[str]) -> str:
    """WHATWG "percent-encode after encoding" of a run in the document encoding."""
    run = match.group()
    try:
        data = run.encode(codec)
    except UnicodeEncodeError:
        return "".join([_encode_query_char(codec, char) for char in run])
    return "".join([_HEX[b] if b > 0x7E or b in _QUERY_ASCII_SET else chr(b) for b in data])


def _encode_query_char(codec: str, char: str) -> str:
    try:
        data = char.encode(codec)
    except UnicodeEncodeError:
        return f"%26%23{ord(char)}%3B"  # "&#NNN;" as WHATWG writes unencodable characters
    return "".join([_HEX[b] if b > 0x7E or b in _QUERY_ASCII_SET else chr(b) for b in data])


def _encode_query(query: str, codec: str) -> str:
    if codec == "utf-8" or query.isascii():
        return _QUERY_SET.sub(_utf8_escaped, query)
    return _QUERY_SET.sub(functools.partial(_encode_query_run, codec), query)


def _build_path(segments: list[str], relative: str) -> str:
    """Append a relative path to ``segments`` (mutated), resolving dot segments."""
    parts = relative.replace("\\", "/").split("/")
    last = len(parts) - 1
    for i, segment in enumerate(parts):
        if segment in _DOUBLE_DOT:
            if segments:
                segments.pop()
            if i == last:
                segments.append("")
        elif segment in _SINGLE_DOT:
            if i == last:
                segments.append("")
        else:
            segments.append(segment)
    return _PATH_SET.sub(_utf8_escaped, "/" + "/".join(segments))


def _parse_port(port: str, scheme: str) -> str:
    if not port:
        return ""
    significant = port.lstrip("0") or "0"  # int() refuses over 4300 digits
    if not (port.isascii() and port.isdigit()) or len(significant) > 5 or int(significant) > 65535:
        raise InvalidURLError(f"invalid port {port[:20]!r}")
    return "" if significant == DEFAULT_PORTS[scheme] else significant


def _ipv6(address: str) -> str:
    if "%" in address:  # zone ids are not allowed in URLs
        raise InvalidURLError(f"invalid IPv6 address {address[:60]!r}")
    try:
        return ipaddress.IPv6Address(address).compressed
    except ValueError:
        raise InvalidURLError(f"invalid IPv6 address {address[:60]!r}") from None


def _ends_in_number(host: str) -> bool:
    """WHATWG "ends in a number": such hosts must parse as IPv4."""
    last = (host[:-1] if host.endswith(".") else host).rpartition(".")[2]
    if not last:
        return False
    if last[0] == "0" and last[1:2] == "x":
        return all(c in _HEXDIGITS for c in last[2:])
    return all(c in _DIGITS for c in last)


def _ipv4_number(part: str) -> int:
    digits, allowed, radix = part, _DIGITS, 10
    if part[:2] in ("0x", "0X"):
        digits, allowed, radix = part[2:], _HEXDIGITS, 16
    elif len(part) > 1 and part[0] == "0":
        digits, allowed, radix = part[1:], _OCTAL, 8
    # Past 11 significant digits no radix fits in 32 bits (and int() has a size limit).
    if not part or len(digits.lstrip("0")) > 11 or not all(c in allowed for c in digits):
        raise InvalidURLError(f"invalid IPv4 address part {part[:20]!r}")
    return int(digits.lstrip("0") or "0", radix)


def _ipv4(host: str) -> str:
    """WHATWG IPv4 parser: "0x7f.1" and "2130706433" both mean 127.0.0.1."""
    parts = host.split(".")
    if parts[-1] == "" and len(parts) > 1:
        parts.pop()
    if len(parts) > 4:
        raise InvalidURLError(f"invalid IPv4 address {host[:60]!r}")
    numbers = [_ipv4_number(part) for part in parts]
    if any(n > 255 for n in numbers[:-1]) or numbers[-1] >= 256 ** (5 - len(numbers)):
        raise InvalidURLError(f"invalid IPv4 address {host[:60]!r}")
    value = numbers[-1]
    for i, n in enumerate(numbers[:-1]):
        value += n << (8 * (3 - i))
    return ".".join(str((value >> shift) & 255) for shift in (24, 16, 8, 0))


def _domain_to_ascii(domain: str) -> str:
    """Lowercase, non-ASCII labels in punycode: UTS #46 non-transitional, as browsers do.

    ``faß.de`` stays ``xn--fa-hia.de`` (IDNA 2003 would map it to ``fass.de``, a
    different domain). The mapping (case, width, ``。``) is UTS #46's; a label
    IDNA 2008 rejects but UTS #46 allows (emoji) is still encoded, as the
    WHATWG URL standard does.
    """
    if domain.isascii():
        return domain.lower()
    for label in _LABEL_DOTS.split(domain):
        if len(label) > _MAX_LABEL_CHARS:  # punycode is quadratic; such a label fails anyway
            raise InvalidURLError(f"international host label too long {label[:60]!r}")
    try:
        mapped = idna.uts46_remap(domain, std3_rules=False, transitional=False)
    except (idna.IDNAError, UnicodeError):
        raise InvalidURLError(f"invalid international host {domain[:60]!r}") from None
    return ".".join(_label_to_ascii(label) for label in mapped.split("."))


def _label_to_ascii(label: str) -> str:
    if label.isascii():
        return label.lower()
    try:
        return idna.alabel(label).decode("ascii")
    except (idna.IDNAError, UnicodeError):
        pass
    try:  # valid under UTS #46 though not IDNA 2008 (emoji): encoded all the same
        encoded = "xn--" + label.encode("punycode").decode("ascii")
    except UnicodeError:
        encoded = ""
    if not encoded or len(encoded) > _MAX_DNS_LABEL:
        raise InvalidURLError(f"invalid international host label {label[:60]!r}")
    return encoded


def _parse_host(host: str) -> str:
    if not host:
        raise InvalidURLError("URL has no host")
    if host[0] == "[":
        if host[-1] != "]":
            raise InvalidURLError(f"invalid IPv6 host {host[:60]!r}")
        return "[" + _ipv6(host[1:-1]) + "]"
    if "%" in host:
        try:
            host = unquote_to_bytes(host).decode("utf-8")
        except UnicodeError:
            raise InvalidURLError(f"invalid escapes in host {host[:60]!r}") from None
    host = _domain_to_ascii(host)
    if not host or _FORBIDDEN_DOMAIN.search(host):
        raise InvalidURLError(f"invalid host {host[:60]!r}")
    if _DOTTED_QUAD.match(host):
        return host  # already the canonical IPv4 form
    return _ipv4(host) if _ends_in_number(host) else host


def _parse_authority(authority: str, scheme: str) -> tuple[str, str, str]:
    """Split and check ``[userinfo@]host[:port]``; returns (userinfo, host, port)."""
    userinfo = ""
    if "@" in authority:
        info, _, authority = authority.rpartition("@")
        user, _, password = info.partition(":")
        userinfo = _USERINFO_SET.sub(_utf8_escaped, user)
        if password:
            userinfo += ":" + _USERINFO_SET.sub(_utf8_escaped, password)
    if authority.startswith("["):
        end = authority.find("]") + 1
        host, port = authority[:end], authority[end:]
        if end == 0 or (port and port[0] != ":"):
            raise InvalidURLError(f"invalid IPv6 host {authority[:60]!r}")
        port = port[1:]
    else:
        host, _, port = authority.partition(":")
    return userinfo, _parse_host(host), _parse_port(port, scheme)


def _split_tail(tail: str, codec: str) -> tuple[str, str | None, str | None]:
    """Split ``path?query#fragment``; query and fragment encoded, path raw."""
    tail, hash_sign, fragment = tail.partition("#")
    path, question_mark, query = tail.partition("?")
    return (
        path,
        _encode_query(query, codec) if question_mark else None,
        _FRAGMENT_SET.sub(_utf8_escaped, fragment) if hash_sign else None,
    )


def _parse_authority_and_rest(scheme: str, rest: str, codec: str) -> _Parts:
    """Parse what follows ``scheme://`` (leading slashes already skipped)."""
    match = _AUTHORITY_END.search(rest)
    end = match.start() if match else len(rest)
    userinfo, host, port = _parse_authority(rest[:end], scheme)
    path, query, fragment = _split_tail(rest[end:], codec)
    return _Parts(scheme, userinfo, host, port, _build_path([], path[1:]), query, fragment)


def _parse_relative(text: str, base: _Parts, codec: str) -> _Parts:
    """WHATWG relative state: ``text`` has no scheme (or the base's own)."""
    if len(text) > 1 and text[0] in "/\\" and text[1] in "/\\":
        return _parse_authority_and_rest(base.scheme, text.lstrip("/\\"), codec)
    path, query, fragment = _split_tail(text, codec)
    if path:
        if path[0] in "/\\":
            path = _build_path([], path[1:])
        else:
            path = _build_path(base.path[1:].split("/")[:-1], path)
    elif query is None:
        path, query = base.path, base.query
    else:
        path = base.path
    return base._replace(path=path, query=query, fragment=fragment)


@functools.lru_cache(maxsize=256)
@functools.lru_cache(maxsize=64)
def _parse_base(base: str) -> _Parts:
    """Parse a page's base URL once for all the links on the page (cached: a page's
    fifty links share it)."""
    text = _clean(base)
    _check_length(text)
    match = _SCHEME.match(text)
    scheme = match.group()[:-1].lower() if match else ""
    if match is None or scheme not in DEFAULT_PORTS:
        raise InvalidURLError(f"base URL is not http(s): {base[:200]!r}")
    return _parse_authority_and_rest(scheme, text[match.end() :].lstrip("/\\"), "utf-8")


def _serialize(parts: _Parts) -> str:
    authority = f"{parts.userinfo}@{parts.host}" if parts.userinfo else parts.host
    if parts.port:
        authority += ":" + parts.port
    url = f"{parts.scheme}://{authority}{parts.path}"
    if parts.query is not None:
        url += "?" + parts.query
    if parts.fragment is not None:
        url += "#" + parts.fragment
    return url


def resolve(raw: str, base: str, encoding: str = "utf-8") -> str:
    """Resolve a link as a browser would, so we request what a visitor would.

    Follows the WHATWG URL standard for http(s): whitespace cleanup, "\\" as
    "/", relative references, IDNA and IPv4 hosts, default ports dropped. The
    query is percent-encoded in the document's ``encoding`` (unencodable
    characters as ``%26%23NNN%3B``); path and fragment always in UTF-8. The
    fragment is kept. Other schemes (mailto:, javascript:, data:...) come back
    cleaned with the scheme lowercased and never raise. Raises InvalidURLError
    for an http(s) URL that cannot be parsed, or a relative link whose base is
    not http(s).
    """
    text = _clean(raw)
    match = _SCHEME.match(text)
    if match is None:
        _check_length(text)
        return _serialize(_parse_relative(text, _parse_base(base), _python_codec(encoding)))
    scheme = match.group()[:-1].lower()
    rest = text[match.end() :]
    if scheme not in DEFAULT_PORTS:
        return scheme + ":" + rest
    _check_length(text)
    codec = _python_codec(encoding)
    try:
        base_parts: _Parts | None = _parse_base(base)
    except InvalidURLError:
        base_parts = None
    if base_parts is not None and base_parts.scheme == scheme:
        return _serialize(_parse_relative(rest, base_parts, codec))  # "http:x" is relative
    return _serialize(_parse_authority_and_rest(scheme, rest.lstrip("/\\"), codec))


def _is_canonical(match: re.Match[str]) -> bool:
    """Whether a ``_CANONICAL`` match would come out of the slow path unchanged."""
    scheme, host, port, path = match.groups()
    if "/." in path or ("%" in match.string and _ESCAPED_UNRESERVED.search(match.string)):
        return False
    if host.rpartition(".")[2][0] in _DIGITS and not _DOTTED_QUAD.match(host):
        return False  # may be another IPv4 form ("0x7f.1"), which must be rewritten
    return not port or (int(port) <= 65535 and port != DEFAULT_PORTS[scheme])


def _normalize_slow(url: str) -> tuple[str, str]:
    _check_length(url)
    text = _clean(url)
    match = _SCHEME.match(text)
    scheme = match.group()[:-1].lower() if match else ""
    if match is None or scheme not in DEFAULT_PORTS:
        raise InvalidURLError(f"not an http(s) URL: {url[:200]!r}")
    parts = _parse_authority_and_rest(scheme, text[match.end() :].lstrip("/\\"), "utf-8")
    host = parts.host if parts.host[0] == "[" else parts.host.rstrip(".")
    if not host:
        raise InvalidURLError(f"URL has no host: {url[:200]!r}")
    if host != parts.host and _ends_in_number(host):  # "0x.." loses its dots: now IPv4
        host = _ipv4(host)
    authority = host + ":" + parts.port if parts.port else host
    if parts.userinfo:
        authority = _canonical(_CANON_USERINFO, parts.userinfo) + "@" + authority
    key = f"{scheme}://{authority}{_canonical(_CANON_PATH, parts.path)}"
    if parts.query:
        key += "?" + _canonical(_CANON_QUERY, parts.query)
    fragment = _canonical(_CANON_FRAGMENT, parts.fragment) if parts.fragment else ""
    return key, fragment


def normalize(url: str) -> tuple[str, str]:
    """The crawl's dedup key for an absolute http(s) URL, and its fragment.

    Returns ``(key, fragment)``: ``key`` has no fragment, ``fragment`` has no
    "#" ("" when absent). Scheme and host lowercased, IDNA hosts in punycode,
    host's trailing dot and default port dropped, dot segments resolved, empty
    path as "/", escapes of unreserved characters decoded and other escapes
    uppercased, characters outside RFC 3986 escaped as UTF-8, an empty query
    dropped; parameter order and userinfo kept. Idempotent on ``key``.
    Raises InvalidURLError for other schemes or unparsable URLs.
    """
    match = _CANONICAL.match(url) if len(url) <= MAX_URL_CHARS else None
    if match is not None and _is_canonical(match):
        key, _, fragment = url.partition("#")
        return key, fragment
    return _normalize_slow(url)


def decoded_fragment(fragment: str) -> str:
    """A fragment (from ``normalize``) as an element's id is compared with it: UTF-8 decoded.

    ``%00`` stays as written: no id holds a NUL (HTML parsers replace it), and
    a store cannot keep one in a text (PostgreSQL refuses it).
    """
    if "%" not in fragment:
        return fragment
    if "%00" not in fragment:
        return unquote(fragment)
    return "%00".join(unquote(part) for part in fragment.split("%00"))


def host_of(key: str) -> str:
    """The authority used for scope and politeness: ``host[:port]`` of a key.

    Pure string slicing: ``key`` must come from ``normalize`` (lowercase host,
    default port already dropped).
    """
    start = key.find("://") + 3
    end = key.find("/", start)
    authority = key[start:end] if end >= 0 else key[start:]
    return authority.rpartition("@")[2]


def scheme_of(url: str) -> str:
    """The lowercased scheme of a URL or raw link, "" when it has none."""
    match = _SCHEME.match(url)
    if match is None:
        match = _SCHEME.match(_clean(url))
    return match.group()[:-1].lower() if match else ""


def is_http(url: str) -> bool:
    """Whether a URL is http or https, the only schemes the crawler requests."""
    return scheme_of(url) in DEFAULT_PORTS


# An http(s) URL a request can be made for as written: lowercase scheme and
# host (a name or a bracketed IPv6 address), an optional port, a path of
# printable ASCII without "#" or spaces, no credentials. Keys are; the rest
# take yarl's parse.
_REQUEST_TARGET = re.compile(
    r"(https?)://([a-z0-9._~-]+|\[[0-9a-f:.]+\])(?::([0-9]{1,5}))?(/[!\"$-~]*)\Z"
)


def request_target(url: str) -> tuple[str, str, int, str] | None:
    """(scheme, host, port, path and query) of a plain http(s) URL, else None.

    What yarl's ``raw_host``, ``port`` and ``raw_path_qs`` give for the same
    URL (a property test holds it), without building a URL object per request.
    """
    match = _REQUEST_TARGET.match(url)
    if match is None or url[-1] == "?":
        return None
    scheme, host, port, path = match.groups()
    number = int(port) if port is not None else int(DEFAULT_PORTS[scheme])
    if not 0 < number <= 65535:
        return None
    return scheme, host.strip("[]"), number, path


# A relative reference made only of characters a key keeps as they are: no
# scheme (no ":" before the fragment), no query, no escapes, no backslash.
_PLAIN_REF = re.compile(
    r"([A-Za-z0-9\-._~!$&'()*+,;=@/]*)(?:#([A-Za-z0-9\-._~!$&'()*+,;=:@/?]*))?\Z"
)


def resolve_key(raw: str, base_key: str) -> tuple[str, str] | None:
    """``normalize(resolve(raw, base_key))`` for the common plain links, else None.

    Most links on a page are plain relative paths ("../3/3016.html",
    "/about", "#top"). Against a base that is already a key they resolve by
    string slicing alone; everything else (escapes, queries, other schemes,
    "//host" references) returns None and takes the full WHATWG path. The
    result is exactly what the full path gives (a property test holds it).
    """
    match = _PLAIN_REF.match(raw)
    if match is None:
        return None
    path, fragment = match.group(1), match.group(2) or ""
    if not path:
        return (base_key, fragment) if match.group(2) is not None else None
    if path[:2] == "//":
        return None
    start = base_key.find("/", base_key.find("://") + 3)
    if start < 0:
        return None
    if path[0] == "/":
        segments: list[str] = []
        path = path[1:]
    else:
        segments = base_key[start + 1 :].partition("?")[0].split("/")[:-1]
    parts = path.split("/")
    last = len(parts) - 1
    for i, segment in enumerate(parts):
        if segment == "..":
            if segments:
                segments.pop()
            if i == last:
                segments.append("")
        elif segment == ".":
            if i == last:
                segments.append("")
        else:
            segments.append(segment)
    return base_key[:start] + "/" + "/".join(segments), fragment


@functools.lru_cache(maxsize=256)
def is_key(url: str) -> bool:
    """Whether ``url`` is a dedup key already (normalizes to itself, no fragment)."""
    try:
        return normalize(url) == (url, "")
    except InvalidURLError:
        return False
