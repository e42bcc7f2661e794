"""The canonicalizer: WHATWG resolution, the dedup key, and their invariants."""

from __future__ import annotations

from urllib.parse import unquote

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from yarl import URL

from crawler import urls
from crawler.errors import InvalidURLError
from crawler.urls import (
    MAX_URL_CHARS,
    _normalize_slow,
    host_of,
    is_http,
    normalize,
    request_target,
    resolve,
    resolve_key,
    scheme_of,
)

BASE = "http://example.com/a/b/c?q#f"


# --- normalize: every spelling of one resource gives one key ----------------


@pytest.mark.parametrize(
    ("url", "key", "fragment"),
    [
        ("http://example.com/a#frag", "http://example.com/a", "frag"),
        ("http://example.com/a#", "http://example.com/a", ""),
        ("http://example.com:80/a", "http://example.com/a", ""),
        ("https://example.com:443/a", "https://example.com/a", ""),
        ("https://example.com:80/a", "https://example.com:80/a", ""),
        ("http://example.com:8080/a", "http://example.com:8080/a", ""),
        ("http://example.com:0080/a", "http://example.com/a", ""),
        ("HTTP://EXAMPLE.COM/A", "http://example.com/A", ""),
        ("http://example.com", "http://example.com/", ""),
        ("http://example.com.", "http://example.com/", ""),
        ("http://example.com./a", "http://example.com/a", ""),
        ("http://0x../", "http://0.0.0.0/", ""),
        ("http://example.com/a/./b/../c", "http://example.com/a/c", ""),
        ("http://example.com/../../x", "http://example.com/x", ""),
        ("http://example.com/a/..", "http://example.com/", ""),
        ("http://example.com/a/%2e%2E/b", "http://example.com/b", ""),
        ("http://example.com/%7e", "http://example.com/~", ""),
        ("http://example.com/%7E%41%2d%2E%5f", "http://example.com/~A-._", ""),
        ("http://example.com/%2f%3f%3a%c3%a9", "http://example.com/%2F%3F%3A%C3%A9", ""),
        ("http://example.com/?", "http://example.com/", ""),
        ("http://example.com/?#top", "http://example.com/", "top"),
        ("http://example.com/?b=2&a=1", "http://example.com/?b=2&a=1", ""),
        ("http://example.com/?a=%7e%2b", "http://example.com/?a=~%2B", ""),
        ("http://example.com/a b", "http://example.com/a%20b", ""),
        ("http://example.com/?q=a b", "http://example.com/?q=a%20b", ""),
        ("http://example.com/é", "http://example.com/%C3%A9", ""),
        ("http://example.com/a|b^c", "http://example.com/a%7Cb%5Ec", ""),
        ("http://example.com/a\\b", "http://example.com/a/b", ""),
        ("http://example.com/?q='x'", "http://example.com/?q=%27x%27", ""),
        ("http://bücher.de/", "http://xn--bcher-kva.de/", ""),
        ("http://BÜCHER.DE/", "http://xn--bcher-kva.de/", ""),
        ("http://xn--bcher-kva.de/", "http://xn--bcher-kva.de/", ""),
        ("http://例え。テスト/", "http://xn--r8jz45g.xn--zckzah/", ""),
        # UTS #46 non-transitional, as browsers: sharp s and final sigma are kept
        ("http://faß.de/", "http://xn--fa-hia.de/", ""),
        ("http://FASS.de/", "http://fass.de/", ""),
        ("http://βόλος.com/", "http://xn--nxasmm1c.com/", ""),
        ("http://\uff25\uff38\uff21\uff2d\uff30\uff2c\uff25\uff0ecom/", "http://example.com/", ""),
        ("http://💩.la/", "http://xn--ls8h.la/", ""),
        ("http://%65xample.com/", "http://example.com/", ""),
        ("http://user:pass@Example.com/", "http://user:pass@example.com/", ""),
        ("http://[0:0::1]:8080/", "http://[::1]:8080/", ""),
        ("http://0x7f.1/", "http://127.0.0.1/", ""),
        ("http://2130706433/", "http://127.0.0.1/", ""),
        ("http://0x" + "0" * 5000 + "1/", "http://0.0.0.1/", ""),
        ("http://a:" + "0" * 5000 + "81/", "http://a:81/", ""),
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080/", ""),
        ("  http://example.com/a\n\tb  ", "http://example.com/ab", ""),
        ("http://example.com/%%61b", "http://example.com/%%61b", ""),
        ("http://example.com/a#b%7e c", "http://example.com/a", "b~%20c"),
        ("http:///example.com/a", "http://example.com/a", ""),
        ("https:\\\\example.com\\a", "https://example.com/a", ""),
    ],
)
def test_normalize(url: str, key: str, fragment: str) -> None:
    assert normalize(url) == (key, fragment)


@pytest.mark.parametrize(
    "spellings",
    [
        [
            "http://example.com/~user/",
            "HTTP://Example.COM:80/%7euser/",
            "http://example.com./%7Euser/./",
            "http://example.com/x/../%7Euser/?",
            "http://example.com/~user/#section",
        ],
        ["http://example.com/a%20b", "http://example.com/a b", "http://example.com/a%20b?#"],
        ["https://bücher.de/", "https://xn--bcher-kva.de:443", "https://BÜCHER.de./"],
    ],
)
def test_spellings_of_one_resource_share_a_key(spellings: list[str]) -> None:
    keys = {normalize(url)[0] for url in spellings}
    assert len(keys) == 1


def test_normalize_keeps_query_order_and_reserved_escapes_distinct() -> None:
    assert normalize("http://e.com/?a=1&b=2")[0] != normalize("http://e.com/?b=2&a=1")[0]
    assert normalize("http://e.com/a%2Fb")[0] != normalize("http://e.com/a/b")[0]


@pytest.mark.parametrize(
    "url",
    [
        "mailto:someone@example.com",
        "ftp://example.com/",
        "javascript:void(0)",
        "relative/path",
        "",
        "http://",
        "http://:80/",
        "http://user@/",
        "http://example.com:99999/",
        "http://example.com:abc/",
        "http://example.com:-1/",
        "http://[::1/",
        "http://[::1]x/",
        "http://[not:an:ip]/",
        "http://[fe80::1%25eth0]/",
        "http://exa mple.com/",
        "http://exa<mple.com/",
        "http://exa%00mple.com/",
        "http://%ff.com/",
        "http://1.2.3.4.5/",
        "http://256.0.0.1/",
        "http://1.2.3.09/",
        "http://" + "ü" * 70 + ".com/",
        "http://" + "ü" * 60_000 + ".com/",
        "http://1" + "0" * 5000 + "/",
        "http://a:" + "1" * 5000 + "/",
        "http://.",
        "http://example.com/" + "a" * MAX_URL_CHARS,
    ],
)
def test_normalize_rejects(url: str) -> None:
    with pytest.raises(InvalidURLError):
        normalize(url)


def test_invalid_url_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="port"):
        normalize("http://example.com:99999/")


# --- resolve: links mean what they mean in a browser --------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("d", "http://example.com/a/b/d"),
        ("./d", "http://example.com/a/b/d"),
        ("../d", "http://example.com/a/d"),
        ("../../../../d", "http://example.com/d"),
        (".", "http://example.com/a/b/"),
        ("..", "http://example.com/a/"),
        ("%2e%2E/d", "http://example.com/a/d"),
        ("/d", "http://example.com/d"),
        ("//other.org/x", "http://other.org/x"),
        ("////other.org/x", "http://other.org/x"),
        ("\\\\other.org\\x", "http://other.org/x"),
        ("\\d\\e", "http://example.com/d/e"),
        ("?y=1", "http://example.com/a/b/c?y=1"),
        ("#g", "http://example.com/a/b/c?q#g"),
        ("", "http://example.com/a/b/c?q"),
        ("   /x  ", "http://example.com/x"),
        ("\x00\x1f /x\x01", "http://example.com/x"),
        ("/x\n/y\t?z\r", "http://example.com/x/y?z"),
        ("http:d", "http://example.com/a/b/d"),
        ("http:///x", "http://x/"),
        ("https:host.org/p", "https://host.org/p"),
        ("HTTP://EXAMPLE.ORG", "http://example.org/"),
        ("http://example.org:80/x", "http://example.org/x"),
        ("http://example.org./x", "http://example.org./x"),
        ("https://bücher.de/ü?ü#ü", "https://xn--bcher-kva.de/%C3%BC?%C3%BC#%C3%BC"),
        ("x?a=b c#d e", "http://example.com/a/b/x?a=b%20c#d%20e"),
        ("x?q='", "http://example.com/a/b/x?q=%27"),
        ("x?q=a\\b", "http://example.com/a/b/x?q=a\\b"),
        ("x/%7e/%zz", "http://example.com/a/b/x/%7e/%zz"),
        ("http://user:pa ss@h.org/", "http://user:pa%20ss@h.org/"),
        ("http://a@b@h.org/", "http://a%40b@h.org/"),
        ("http://0x7f.1/", "http://127.0.0.1/"),
        ("http://017700000001/", "http://127.0.0.1/"),
        ("http://[0:0::1]/", "http://[::1]/"),
    ],
)
def test_resolve_whatwg(raw: str, expected: str) -> None:
    assert resolve(raw, BASE) == expected


@pytest.mark.parametrize(
    ("raw", "encoding", "expected"),
    [
        ("?q=é", "utf-8", "?q=%C3%A9"),
        ("?q=é", "windows-1252", "?q=%E9"),
        ("?q=é", "iso-8859-1", "?q=%E9"),
        ("?q=€", "windows-1252", "?q=%80"),
        ("?q=中", "windows-1252", "?q=%26%2320013%3B"),
        ("?q=é中", "windows-1252", "?q=%E9%26%2320013%3B"),
        ("?q=é", "utf-16le", "?q=%C3%A9"),
        ("?q=é", "no-such-encoding", "?q=%C3%A9"),
        ("?q=ソ", "shift_jis", "?q=%83\\"),  # the trail byte 0x5C stays literal, as WHATWG says
        ("?q=é", "koi8-r", "?q=%26%23233%3B"),
    ],
)
def test_resolve_encodes_query_in_document_encoding(raw: str, encoding: str, expected: str) -> None:
    assert resolve(raw, "http://example.com/p", encoding) == "http://example.com/p" + expected


def test_resolve_encodes_path_and_fragment_as_utf8_whatever_the_encoding() -> None:
    url = resolve("é?é#é", "http://example.com/", "windows-1252")
    assert url == "http://example.com/%C3%A9?%E9#%C3%A9"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("mailto:Foo@Bar.com", "mailto:Foo@Bar.com"),
        ("MAILTO:Foo@Bar.com", "mailto:Foo@Bar.com"),
        ("JavaScript:void(0)", "javascript:void(0)"),
        ("java\nscript:alert(1)", "javascript:alert(1)"),
        ("  tel:+1-555  ", "tel:+1-555"),
        ("data:text/plain,a b", "data:text/plain,a b"),
        ("FTP://example.com/x", "ftp://example.com/x"),
        ("weird+scheme:[stuff]", "weird+scheme:[stuff]"),
    ],
)
def test_resolve_returns_other_schemes_as_they_are(raw: str, expected: str) -> None:
    assert resolve(raw, BASE) == expected


def test_resolve_other_schemes_never_raise_even_when_long() -> None:
    data = "data:," + "a" * (MAX_URL_CHARS * 2)
    assert resolve(data, BASE) == data


@pytest.mark.parametrize(
    "raw",
    [
        "http://",
        "//",
        "http://example.com:99999/",
        "http://example.com:abc/",
        "http://[::1/",
        "http://[zz]/",
        "http://exa mple.com/",
        "http://a<b/",
        "//%ff/",
        "http://1.2.3.4.5/",
        "/" + "a" * MAX_URL_CHARS,
    ],
)
def test_resolve_rejects(raw: str) -> None:
    with pytest.raises(InvalidURLError):
        resolve(raw, BASE)


def test_resolve_relative_needs_an_http_base() -> None:
    with pytest.raises(InvalidURLError):
        resolve("x", "mailto:a@b.c")
    assert resolve("https://x.org/", "about:blank") == "https://x.org/"


# --- small helpers ------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("http://example.org/", "example.org"),
        ("http://127.0.0.1:8080/x", "127.0.0.1:8080"),
        ("https://user:pw@example.org:8443/a@b", "example.org:8443"),
        ("http://[::1]:8080/", "[::1]:8080"),
        ("https://example.org/?next=http://other/", "example.org"),
    ],
)
def test_host_of(url: str, host: str) -> None:
    assert host_of(normalize(url)[0]) == host


@pytest.mark.parametrize(
    ("url", "scheme", "http"),
    [
        ("http://x/", "http", True),
        ("HTTPS://x/", "https", True),
        ("  https://x/", "https", True),
        ("mailto:a@b", "mailto", False),
        ("ftp://x", "ftp", False),
        ("/relative", "", False),
        ("", "", False),
        ("1http://x", "", False),
    ],
)
def test_scheme_of_and_is_http(url: str, scheme: str, http: bool) -> None:
    assert scheme_of(url) == scheme
    assert is_http(url) is http


# --- properties ---------------------------------------------------------------

_SEGMENT_CHARS = st.sampled_from(
    [
        *("a", "Z", "0", "-", ".", "_", "~", "%", "%2e", "%7E", "%2F", "%c3%a9", "%41", "é", " "),
        *(
            "'",
            "!",
            "$",
            "&",
            "(",
            "*",
            "+",
            ",",
            ";",
            "=",
            ":",
            "@",
            "|",
            "^",
            "[",
            '"',
            "\\",
            "中",
        ),
    ]
)
_SEGMENT = st.one_of(
    st.sampled_from(["", ".", "..", "%2e", ".%2E"]),
    st.lists(_SEGMENT_CHARS, max_size=6).map("".join),
)
_HOST = st.one_of(
    st.sampled_from(
        [
            *("example.com", "EXAMPLE.com.", "bücher.de", "127.0.0.1", "0x7f.1", "[::1]", "a..b"),
            *("xn--bcher-kva.de", "%65x.org", "1.2.3.4.", "h-1.io", "ex_am.ple", "例え。テスト"),
        ]
    ),
    st.from_regex(r"[a-zA-Z0-9\-]{1,10}(\.[a-z]{1,5}){0,2}\.?", fullmatch=True),
)


@st.composite
def _urls(draw: st.DrawFn) -> str:
    scheme = draw(st.sampled_from(["http", "https", "HTTP", "hTTps"]))
    userinfo = draw(st.sampled_from(["", "user@", "u:p@", "u%7e:p%3a@", ":@"]))
    port = draw(st.sampled_from(["", ":80", ":443", ":8080", ":", ":065535", ":1"]))
    path = "/".join(draw(st.lists(_SEGMENT, max_size=5)))
    query = draw(
        st.one_of(st.just(""), st.lists(_SEGMENT_CHARS, max_size=6).map(lambda c: "?" + "".join(c)))
    )
    fragment = draw(
        st.one_of(st.just(""), st.lists(_SEGMENT_CHARS, max_size=4).map(lambda c: "#" + "".join(c)))
    )
    return f"{scheme}://{userinfo}{draw(_HOST)}{port}/{path}{query}{fragment}"


@settings(max_examples=300, deadline=None)
@given(_urls())
def test_normalize_is_idempotent(url: str) -> None:
    try:
        key, _fragment = normalize(url)
    except InvalidURLError:
        return
    assert normalize(key) == (key, "")
    assert key.startswith(("http://", "https://"))
    assert "#" not in key
    assert not key.endswith("?")


@settings(max_examples=300, deadline=None)
@given(_urls())
def test_normalize_fast_path_agrees_with_full_parse(url: str) -> None:
    try:
        key, fragment = _normalize_slow(url)
    except InvalidURLError:
        return
    assert normalize(url) == (key, fragment)
    assert normalize(key + "#" + fragment) == (key, fragment)
    assert _normalize_slow(key) == (key, "")


def _yarl_target(url: str) -> tuple[str, str, int, str] | None:
    """What the fetcher took from yarl before ``request_target``; None where it could not."""
    try:
        parsed = URL(url, encoded=True)
        host, port = parsed.raw_host, parsed.port
    except ValueError:
        return None
    if not host or port is None:
        return None
    return parsed.scheme, host, port, parsed.raw_path_qs


@settings(max_examples=400, deadline=None)
@given(_urls())
def test_request_target_is_what_yarl_reads_and_takes_every_key(url: str) -> None:
    target = request_target(url)
    if target is not None:
        assert target == _yarl_target(url)
    try:
        key, _fragment = normalize(url)
    except InvalidURLError:
        return
    if "@" not in key:  # credentials take yarl's parse (they are sent as Basic auth)
        assert request_target(key) == _yarl_target(key) is not None


@pytest.mark.parametrize(
    "url",
    [
        "HTTP://example.com/",  # not a key: yarl's parse
        "http://Example.com/",
        "http://example.com/?",  # yarl drops the empty query
        "http://user@example.com/",
        "http://example.com/a b",
        "http://example.com/a#b",
        "http://example.com:0/",
        "http://example.com:65536/",
        "http://example.com",
        "ftp://example.com/",
    ],
)
def test_request_target_leaves_the_unusual_to_yarl(url: str) -> None:
    assert request_target(url) is None


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_normalize_of_arbitrary_text_fails_only_with_invalid_url_error(text: str) -> None:
    for url in (text, "http://" + text, "https://example.com/" + text):
        try:
            key, _ = normalize(url)
        except InvalidURLError:
            continue
        assert normalize(key)[0] == key


@settings(max_examples=200, deadline=None)
@given(
    st.text(max_size=60),
    st.sampled_from(["utf-8", "windows-1252", "shift_jis", "utf-16le", "gbk", "bogus"]),
)
def test_resolve_then_normalize_fails_only_with_invalid_url_error(raw: str, encoding: str) -> None:
    try:
        url = resolve(raw, BASE, encoding)
        if is_http(url):
            key, _ = normalize(url)
            assert normalize(key)[0] == key
    except InvalidURLError:
        pass


@settings(max_examples=200, deadline=None)
@given(_urls())
def test_resolving_an_absolute_url_keeps_its_key(url: str) -> None:
    try:
        key, _ = normalize(url)
    except InvalidURLError:
        return
    assume(len(key) < 200)
    assert normalize(resolve(key, "https://elsewhere.org/x/y"))[0] == key
    assert normalize(resolve(url, BASE))[0] == key


_URLISH = st.lists(
    st.sampled_from(
        [
            *"aZ09-._~%:/?#[]@!$&'()*+,;=\\ \t\n\"<>^`{|}",
            *(
                "é",
                "中",
                "ß",
                "。",
                "\x00",
                "\ud800",
                "%2e",
                "%41",
                "%ff",
                "%c3%a9",
                "0x",
                "..",
                "xn--",
            ),
        ]
    ),
    max_size=40,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(
        ["", "http://", "https://", "HTTP:", "//", "/", "http://[", "http://a:", "ftp:"]
    ),
    _URLISH,
    st.sampled_from(["utf-8", "windows-1252", "shift_jis", "iso-2022-jp", "gb18030"]),
)
def test_urlish_text_resolves_to_stable_keys(prefix: str, text: str, encoding: str) -> None:
    try:
        url = resolve(prefix + text, BASE, encoding)
        key, fragment = normalize(url) if is_http(url) else ("http://x/", "")
    except InvalidURLError:
        return
    assert _normalize_slow(key) == (key, "")
    assert normalize(key + "#" + fragment) == (key, fragment)


_PLAIN_SEGMENT = st.sampled_from(
    ["", ".", "..", "a", "b.html", "..x", ".x", "x~y", "(p)", "q=1&r", "@"]
)
_BASES = st.sampled_from(
    [
        "http://example.com/",
        "http://example.com/a/b/c.html",
        "https://example.com:8443/a/",
        "http://127.0.0.1:8080/p/3/3049.html",
        "http://example.com/a/b?x=1",
        "http://user@example.com/dir/page",
    ]
)


@given(
    st.lists(_PLAIN_SEGMENT, min_size=0, max_size=6),
    st.sampled_from(["", "/", "//"]),
    st.one_of(st.none(), st.sampled_from(["", "top", "s1", "a:b/c?d"])),
    _BASES,
)
def test_resolve_key_agrees_with_resolve_then_normalize(
    segments: list[str], lead: str, fragment: str | None, base: str
) -> None:
    raw = lead + "/".join(segments) + ("" if fragment is None else "#" + fragment)
    fast = resolve_key(raw, base)
    if fast is None:
        return
    assert fast == normalize(resolve(raw, base))


@pytest.mark.parametrize(
    ("raw", "handled"),
    [
        ("../3/3016.html", True),
        ("/about", True),
        ("#top", True),
        ("//other.example/x", False),
        ("a%20b", False),
        ("x?q=1", False),
        ("mailto:a@b", False),
        ("a\\b", False),
        ("", False),
    ],
)
def test_resolve_key_takes_only_plain_links(raw: str, handled: bool) -> None:
    fast = resolve_key(raw, "http://example.com/a/b.html")
    assert (fast is not None) == handled
    if fast is not None:
        assert fast == normalize(resolve(raw, "http://example.com/a/b.html"))


def _c0_control_set(code: int) -> bool:
    return code < 0x20 or code > 0x7E  # C0 controls, and every code point past "~"


PERCENT_ENCODE_SETS = {
    # name: the WHATWG URL Standard's definition (each set is the one before plus more)
    "_FRAGMENT_SET": lambda c: _c0_control_set(c) or chr(c) in ' "<>`',
    "_QUERY_SET": lambda c: _c0_control_set(c) or chr(c) in " \"#<>'",  # special-query
    "_PATH_SET": lambda c: _c0_control_set(c) or chr(c) in ' "#<>?`{}',
    "_USERINFO_SET": lambda c: _c0_control_set(c) or chr(c) in ' "#<>?`{}/:;=@[\\]^|',
}
SOME_CODE_POINTS = [*range(0x3000), 0xD800, 0xDFFF, 0xE000, 0xFFFD, 0xFFFF, 0x10000, 0x10FFFF]


@pytest.mark.parametrize("name", sorted(PERCENT_ENCODE_SETS))
def test_the_percent_encode_sets_are_the_standard_s(name: str) -> None:
    pattern, defined = getattr(urls, name), PERCENT_ENCODE_SETS[name]
    assert [c for c in SOME_CODE_POINTS if bool(pattern.fullmatch(chr(c))) != defined(c)] == []


@given(st.text(max_size=30))
def test_a_decoded_fragment_never_holds_a_nul_and_is_otherwise_unquoted(text: str) -> None:
    try:
        fragment = urls.normalize("http://127.0.0.1/#" + text)[1]
    except InvalidURLError:
        return
    decoded = urls.decoded_fragment(fragment)
    assert "\x00" not in decoded
    if "%00" not in fragment:
        assert decoded == unquote(fragment)
    else:
        assert decoded.count("%00") >= fragment.count("%00")


def test_a_fragment_keeps_its_escaped_nul_and_decodes_the_rest() -> None:
    assert urls.decoded_fragment("x%00y%C3%A9") == "x%00yé"
    assert urls.decoded_fragment("%%00") == "%%00"
    assert urls.decoded_fragment("plain") == "plain"
