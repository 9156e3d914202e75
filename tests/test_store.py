"""stoker.store: URL parsing, Azure credentials, secret redaction, key safety, and BlobStore
against a real Azurite."""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import os
from pathlib import Path
from urllib.parse import parse_qs

import pytest

from azurite import ACCOUNT, ACCOUNT_KEY, Azurite
from stoker._redact import shown as shown_in_bars
from stoker.errors import SourceChangedError, StoreError, UnsafeKeyError
from stoker.store import (
    PosixStore,
    _blob_list,
    azure_auth,
    check_key,
    open_store,
    parse_url,
    redact,
    safe_path,
)
from stoker.store._blob_list import MD5_METADATA

SECRET_SIG = "S3cr3tSignatureValue%2Bend%3D"


# ------------------------------------------------------------------------------ IOLoop
def test_a_closed_io_loop_leaves_nothing_to_warn_about() -> None:
    """Its asyncio loop was stopped but never closed: collected later, it warned "unclosed
    event loop" in the middle of whatever ran then (a test's pytest.warns caught it)."""
    from stoker.store._loop import IOLoop

    io = IOLoop()
    assert io.run(asyncio.sleep(0, "done")) == "done"
    io.close()
    assert io.loop.is_closed()


# ------------------------------------------------------------------------------ parse_url
def test_parse_az_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_NAME", "acct")
    loc = parse_url("az://cont/a/b")
    assert (loc.scheme, loc.account, loc.bucket, loc.prefix, loc.endpoint) == (
        "az",
        "acct",
        "cont",
        "a/b/",
        "https://acct.blob.core.windows.net",
    )
    assert loc.is_remote
    assert str(loc) == "https://acct.blob.core.windows.net/cont/a/b"
    bare = parse_url("az://cont")
    assert (bare.bucket, bare.prefix) == ("cont", "")
    assert parse_url("az://cont/a/").prefix == "a/"


def test_parse_https_url_keeps_the_sas_out_of_sight() -> None:
    url = f"https://acct.blob.core.windows.net/cont/data/x?sv=2022-11-02&sp=rl&sig={SECRET_SIG}"
    loc = parse_url(url)
    assert (loc.scheme, loc.account, loc.bucket, loc.prefix) == ("az", "acct", "cont", "data/x/")
    assert loc.endpoint == "https://acct.blob.core.windows.net"
    assert "sig=" in loc.sas and "sv=2022-11-02" in loc.sas
    for shown in (str(loc), repr(loc), f"{loc}", str([loc])):
        assert "S3cr3t" not in shown
        assert "sig" not in shown
    assert str(loc) == "https://acct.blob.core.windows.net/cont/data/x"


def test_parse_https_url_keeps_the_sas_signature_intact() -> None:
    """A SAS signature is base64: '+', '/' and '=' arrive percent-encoded. The SAS kept in the
    Location must still mean the same signature when a client sends it as a query string."""
    loc = parse_url("https://acct.blob.core.windows.net/cont?sv=2022-11-02&sig=ab%2Bcd%2Fe%3D")
    assert parse_qs(loc.sas)["sig"] == ["ab+cd/e="]


def test_parse_path_style_url() -> None:
    loc = parse_url("http://127.0.0.1:10000/acct/cont/p/q")
    assert (loc.scheme, loc.account, loc.bucket, loc.prefix) == ("az", "acct", "cont", "p/q/")
    assert loc.endpoint == "http://127.0.0.1:10000/acct"
    assert str(loc) == "http://127.0.0.1:10000/acct/cont/p/q"


@pytest.mark.parametrize(
    ("url", "scheme", "bucket", "prefix"),
    [
        ("s3://bucket/x/y", "s3", "bucket", "x/y/"),
        ("s3://bucket", "s3", "bucket", ""),
        ("gs://bkt/one", "gs", "bkt", "one/"),
    ],
)
def test_parse_s3_and_gs(url: str, scheme: str, bucket: str, prefix: str) -> None:
    loc = parse_url(url)
    assert (loc.scheme, loc.bucket, loc.prefix) == (scheme, bucket, prefix)
    assert str(loc) == url.rstrip("/")


def test_parse_plain_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert parse_url("rel/dir").path == tmp_path / "rel" / "dir"
    assert parse_url("./rel").path == tmp_path / "rel"
    assert parse_url(str(tmp_path / "abs")).path == tmp_path / "abs"
    assert parse_url(tmp_path / "obj").path == tmp_path / "obj"
    assert parse_url("~/data").path == tmp_path / "home" / "data"
    assert parse_url(f"file://{tmp_path}/f").path == tmp_path / "f"
    loc = parse_url("rel")
    assert loc.scheme == "file" and not loc.is_remote
    assert str(loc) == str(tmp_path / "rel")


@pytest.mark.parametrize(
    "url",
    [
        "az://cont/run#2",
        "az://cont/run?2",
        "az://cont/run?v=2",
        "http://127.0.0.1:10000/acct/cont/run#2",
        "https://acct.blob.core.windows.net/cont/run?v=2",  # a query that is no SAS
    ],
)
def test_a_url_whose_prefix_a_hash_or_question_mark_would_cut_is_refused(url: str) -> None:
    """urlsplit ends the path at '#' or '?': staging would touch another prefix (and
    --delete empty it)."""
    with pytest.raises(StoreError, match="name a prefix without"):
        parse_url(url)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("az://acct?sig=SECRET", "az://acct"),
        ("az://acct/?sig=SECRET", "az://acct/"),
        ("s3:///key?sig=SECRET", "s3:///key"),
        ("https://acct.blob.core.windows.net/?sig=SECRET", "https://acct.blob.core.windows.net/"),
        ("http://127.0.0.1:10000/acct?sig=SECRET", "http://127.0.0.1:10000/acct"),
        ("ftp://host/x/y?sig=SECRET", "ftp://host/x/y"),
    ],
)
def test_bad_urls_are_named_without_their_query(url: str, shown: str) -> None:
    with pytest.raises(StoreError) as err:
        parse_url(url)
    message = str(err.value)
    assert message.startswith(shown + ":"), message
    assert "SECRET" not in message and "sig" not in message


# ------------------------------------------------------------------------------ azure_auth
def test_auth_from_connection_string(monkeypatch: pytest.MonkeyPatch) -> None:
    key = "Q29ubmVjdGlvblN0cmluZ0tleQ=="
    monkeypatch.setenv(
        "AZURE_STORAGE_CONNECTION_STRING",
        f"DefaultEndpointsProtocol=http;AccountName=acct;AccountKey={key};"
        "BlobEndpoint=http://127.0.0.1:10000/acct;",
    )
    auth = azure_auth(parse_url("az://cont"))
    assert (auth.account, auth.endpoint, auth.key, auth.sas) == (
        "acct",
        "http://127.0.0.1:10000/acct",
        key,
        None,
    )
    assert not auth.uses_aad
    assert key not in repr(auth)
    # A connection string for another account is not used for this one.
    other = azure_auth(parse_url("https://someone.blob.core.windows.net/cont"))
    assert other.key is None and other.uses_aad
    assert other.endpoint == "https://someone.blob.core.windows.net"


def test_auth_from_connection_string_with_endpoint_suffix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "AZURE_STORAGE_CONNECTION_STRING",
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=U3VmZml4S2V5S2V5;"
        "EndpointSuffix=core.chinacloudapi.cn",
    )
    auth = azure_auth(parse_url("az://cont"))
    assert auth.endpoint == "https://acct.blob.core.chinacloudapi.cn"
    assert auth.key == "U3VmZml4S2V5S2V5"


def test_auth_use_development_storage(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", "UseDevelopmentStorage=true")
    auth = azure_auth(parse_url("az://cont"))
    assert auth.endpoint == f"http://127.0.0.1:10000/{ACCOUNT}"
    assert auth.key == ACCOUNT_KEY and auth.sas is None


def test_auth_from_account_and_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT", "acct")
    monkeypatch.setenv("AZURE_STORAGE_KEY", "QWNjb3VudEtleUZyb21FbnY=")
    auth = azure_auth(parse_url("az://cont/p"))
    assert auth.key == "QWNjb3VudEtleUZyb21FbnY=" and auth.sas is None
    assert auth.endpoint == "https://acct.blob.core.windows.net"
    # The variables name one account: another gets no key from them.
    assert azure_auth(parse_url("https://other.blob.core.windows.net/cont")).uses_aad


def test_auth_from_sas_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT", "acct")
    monkeypatch.setenv("AZURE_STORAGE_SAS_TOKEN", "?sv=2022-11-02&sp=rl&sig=EnvSasSignature")
    auth = azure_auth(parse_url("az://cont"))
    assert auth.key is None
    assert auth.sas == "sv=2022-11-02&sp=rl&sig=EnvSasSignature"
    assert "EnvSasSignature" not in repr(auth)


def test_auth_sas_in_url_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT", "acct")
    monkeypatch.setenv("AZURE_STORAGE_KEY", "QWNjb3VudEtleUZyb21FbnY=")
    auth = azure_auth(parse_url("https://acct.blob.core.windows.net/cont?sv=1&sig=UrlSignature"))
    assert auth.key is None and auth.sas is not None and "UrlSignature" in auth.sas


def test_auth_without_credentials_uses_azure_ad(monkeypatch: pytest.MonkeyPatch) -> None:
    assert azure_auth(parse_url("https://acct.blob.core.windows.net/cont")).uses_aad
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_NAME", "acct")  # a name, and no key
    auth = azure_auth(parse_url("az://cont"))
    assert auth.uses_aad and auth.key is None and auth.sas is None


def test_plain_http_to_a_remote_host_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "AZURE_STORAGE_CONNECTION_STRING",
        "AccountName=acct;AccountKey=UmVmdXNlZEtleUtleQ==;BlobEndpoint=http://10.1.2.3:10000/acct",
    )
    with pytest.raises(StoreError) as err:
        azure_auth(parse_url("az://cont"))
    assert "--allow-http" in str(err.value)
    assert "http://10.1.2.3:10000/acct" in str(err.value)
    assert "UmVmdXNlZEtleUtleQ" not in str(err.value)
    auth = azure_auth(parse_url("az://cont"), allow_http=True)
    assert auth.endpoint == "http://10.1.2.3:10000/acct"

    with pytest.raises(StoreError, match="--allow-http"):
        azure_auth(parse_url("http://storage.example.com:10000/acct/cont"))
    with pytest.raises(StoreError, match="--allow-http"):
        open_store("http://storage.example.com:10000/acct/cont")
    monkeypatch.setenv("STOKER_ALLOW_HTTP", "1")
    assert str(open_store("http://storage.example.com:10000/acct/cont")).startswith("http://st")


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::1]", "127.5.6.7"])
def test_plain_http_to_loopback_is_allowed(host: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT", "acct")
    monkeypatch.setenv("AZURE_STORAGE_KEY", "QWNjb3VudEtleQ==")
    auth = azure_auth(parse_url(f"http://{host}:10000/acct/cont"))
    assert auth.endpoint == f"http://{host}:10000/acct"


# ------------------------------------------------------------------------------ redact
def test_redact_removes_keys_and_signatures(monkeypatch: pytest.MonkeyPatch) -> None:
    key = "UmVkYWN0TWVQbGVhc2VLZXk9PQ=="
    monkeypatch.setenv(
        "AZURE_STORAGE_CONNECTION_STRING",
        f"AccountName=acct;AccountKey={key};BlobEndpoint=http://127.0.0.1:1/acct",
    )
    azure_auth(parse_url("az://cont"))
    assert key not in redact(f"request failed: bad key {key} (retry)")
    assert "request failed" in redact(f"request failed: bad key {key}")
    text = redact("DefaultEndpointsProtocol=https;AccountName=a;AccountKey=abc123XYZ;x=1")
    assert "abc123XYZ" not in text and "AccountKey=***" in text and "AccountName=a" in text
    text = redact("GET https://a.blob.core.windows.net/c/k?sv=1&sig=abc%2Bdef%3D&se=2 failed")
    assert "abc" not in text and "sig=***" in text and "se=2" in text and "sv=1" in text
    assert "SharedAccessSignature=***" in redact("SharedAccessSignature=sv=1&sig=zz")
    assert redact("at http://user:pa55word@host:1/a/b") == "at http://user:***@host:1/a/b"
    # Bars show URLs without their query (a mistyped `sig=` too), local paths as they are.
    line = shown_in_bars("az://a/c/p?sv=1&sgi=typo -> https://h/c/k?sv=2&sig=s -> /data/what?.bin")
    assert line == "az://a/c/p -> https://h/c/k -> /data/what?.bin"


# ------------------------------------------------------------------------------ key safety
@pytest.mark.parametrize(
    "key",
    [
        "",
        "..",
        "a/../b",
        "a/../../evil",
        ".",
        "./a",
        "/abs/path",
        "a\x00b",
        "a\\b",
        "a//b",
        "a/",
        "n" * 256,
        "dir/" + "é" * 128,  # 256 bytes in UTF-8
        "a/" * 2100,
        "x.stoker-partial",
        ".stoker/manifest",
    ],
)
def test_check_key_refuses(key: str) -> None:
    with pytest.raises(UnsafeKeyError) as err:
        check_key(key)
    assert repr(key)[:60] in str(err.value)


@pytest.mark.parametrize("key", ["a", "a/b/c.bin", "n" * 255, "..a", "a..b", ".hidden", "é" * 127])
def test_check_key_accepts(key: str) -> None:
    check_key(key)


def test_safe_path(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "inside").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "escape").symlink_to(outside)
    (root / "alias").symlink_to(root / "inside")
    assert safe_path(root, "d/e/f") == root / "d" / "e" / "f"
    assert safe_path(root, "alias/x") == root / "alias" / "x"
    with pytest.raises(UnsafeKeyError, match="'escape/file'.*symlink"):
        safe_path(root, "escape/file")
    with pytest.raises(UnsafeKeyError, match="escape"):
        safe_path(root, "escape/deeper/file")
    with pytest.raises(UnsafeKeyError):
        safe_path(root, "../outside/file")
    assert list(outside.iterdir()) == []


def test_a_folder_not_made_yet_is_resolved_once_for_all_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An import's listing names a folder's files together, all checked before the first one
    makes the folder: each must not cost a resolution of the root and the folder again."""
    import os.path

    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "escape").symlink_to(outside)
    store = PosixStore(tmp_path / "root")
    resolved: list[str] = []
    real = os.path.realpath
    monkeypatch.setattr(os.path, "realpath", lambda p: (resolved.append(p), real(p))[1])
    for i in range(50):
        assert store.file(f"new/f{i}") == f"{tmp_path}/root/new/f{i}"
    assert len(resolved) == 2  # the root, and the folder (not there yet)
    for _ in range(2):  # a refused folder is never remembered as safe
        with pytest.raises(UnsafeKeyError, match="'escape/new/f'.*symlink"):
            store.file("escape/new/f")
    assert list(outside.iterdir()) == []


def test_an_object_stores_empty_range_is_empty_bytes() -> None:
    """obstore refuses a ranged read of nothing ("Invalid range"): an empty object fetched
    whole (a small file into POSIX) must read as no bytes, on any store."""
    import obstore
    from obstore.store import MemoryStore

    from stoker.store._object import ObjectStore

    store = ObjectStore(parse_url("s3://bucket/data"))
    store._store = MemoryStore()  # (obstore's own in-memory store: no S3 here)
    obstore.put(store._store, "empty.bin", b"")
    obstore.put(store._store, "one.bin", b"x")
    assert bytes(run(store.read_range("empty.bin", 0, 0))) == b""
    assert bytes(run(store.read_range("one.bin", 0, 1))) == b"x"


# ------------------------------------------------------------------------------ BlobStore
def run(coro):  # noqa: ANN001, ANN201 - test helper
    return asyncio.run(coro)


async def _listing(store) -> list[list]:  # noqa: ANN001
    return [batch async for batch in store.list()]


def _list_url(url: str) -> list[list]:
    """The listing batches of a freshly opened store."""

    async def go() -> list[list]:
        store = open_store(url)
        try:
            return await _listing(store)
        finally:
            await store.close()

    return run(go())


def test_blob_write_file_records_md5(blob_env: str, azurite: Azurite, tmp_path: Path) -> None:
    small, large = tmp_path / "small.bin", tmp_path / "large.bin"
    small.write_bytes(os.urandom(1000))
    large.write_bytes(os.urandom(200 * 1024 + 7))
    md5 = {p.name: hashlib.md5(p.read_bytes()).hexdigest() for p in (small, large)}

    sent: dict[str, str | None] = {}

    async def go() -> list[list]:
        store = open_store(f"{blob_env}/pre", block_size=64 * 1024, concurrency=4)
        try:
            for path in (small, large):
                sent[path.name] = await store.write_file(path.name, path, path.stat().st_size)
            return await _listing(store)
        finally:
            await store.close()

    batches = run(go())
    infos = {o.key: o for batch in batches for o in batch}
    assert set(infos) == {"small.bin", "large.bin"}
    assert infos["small.bin"].size == 1000 and infos["large.bin"].size == 200 * 1024 + 7
    assert infos["small.bin"].md5 == md5["small.bin"]
    assert infos["large.bin"].md5 == md5["large.bin"]

    container = azurite.client(blob_env)
    props = container.get_blob_client("pre/small.bin").get_blob_properties()
    assert bytes(props.content_settings.content_md5).hex() == md5["small.bin"]  # Content-MD5
    props = container.get_blob_client("pre/large.bin").get_blob_properties()
    # A block upload: stoker hashes it as it sends it and sets the Content-MD5 at the end.
    assert bytes(props.content_settings.content_md5).hex() == md5["large.bin"]
    assert sent == {"small.bin": None, "large.bin": md5["large.bin"]}
    data = container.get_blob_client("pre/large.bin").download_blob().readall()
    assert data == large.read_bytes()


def test_a_file_that_would_need_too_many_blocks_gets_larger_ones(
    blob_env: str, azurite: Azurite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stoker.store import _blocks

    monkeypatch.setattr(_blocks, "MAX_BLOCKS", 4)  # Azure's is 50,000
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(10 * 64 * 1024 + 3))  # 11 blocks of 64 KiB

    async def go() -> None:
        store = open_store(f"{blob_env}/pre", block_size=64 * 1024, concurrency=4)
        try:
            await store.write_file("big.bin", big, big.stat().st_size)
        finally:
            await store.close()

    run(go())
    blob = azurite.client(blob_env).get_blob_client("pre/big.bin")
    committed, _ = blob.get_block_list("committed")
    assert 1 < len(committed) <= 4
    assert blob.download_blob().readall() == big.read_bytes()


def test_blob_list_reads_the_md5_older_stoker_kept_in_metadata(
    blob_env: str, azurite: Azurite
) -> None:
    data = os.urandom(3000)
    blob = azurite.client(blob_env).get_blob_client("old/block.bin")
    blob.stage_block("b0", data)
    blob.commit_block_list(["b0"], metadata={MD5_METADATA: hashlib.md5(data).hexdigest()})
    assert not blob.get_blob_properties().content_settings.content_md5

    (info,) = [o for batch in _list_url(f"{blob_env}/old") for o in batch]
    assert info.md5 == hashlib.md5(data).hexdigest()


def test_blob_list_gives_each_blob_its_last_modified(blob_env: str, azurite: Azurite) -> None:
    blob = azurite.client(blob_env).get_blob_client("when/one.bin")
    blob.upload_blob(b"x")
    (info,) = [o for batch in _list_url(f"{blob_env}/when") for o in batch]
    assert info.mtime == blob.get_blob_properties().last_modified.timestamp()


@pytest.mark.parametrize(
    "text",
    [
        "Wed, 02 Dec 2026 10:00:00 GMT",
        "Thu, 29 Feb 2024 23:59:59 GMT",  # a leap day
        "Thu, 01 Jan 1970 00:00:00 GMT",
        "Wed, 02 Dec 2026 10:00:00 +0100",  # not the service's form: the general parser
        "2 Dec 2026 10:00:00 GMT",
    ],
)
def test_http_dates_read_as_the_general_parser_reads_them(text: str) -> None:
    from email.utils import parsedate_to_datetime

    assert _blob_list._seconds(text) == parsedate_to_datetime(text).timestamp()


@pytest.mark.parametrize("text", [None, "", "yesterday", "Wed, 32 Dec 2026 10:00:00 GMT"])
def test_an_unreadable_http_date_is_no_date(text: str | None) -> None:
    assert _blob_list._seconds(text) is None


def test_blob_list_in_batches(
    blob_env: str, azurite: Azurite, monkeypatch: pytest.MonkeyPatch
) -> None:
    container = azurite.client(blob_env)
    for i in range(7):
        container.upload_blob(f"pre/k{i}", b"x" * i)
    container.upload_blob("prelude", b"not under the prefix")
    container.upload_blob("other/k", b"not under the prefix")
    monkeypatch.setattr(_blob_list, "LIST_BATCH", 3)  # (the page size the listing asks)
    monkeypatch.setattr(_blob_list, "FIRST_PAGE", 2)  # (the first page's: the copy starts)

    batches = _list_url(f"{blob_env}/pre")
    assert [len(b) for b in batches] == [2, 3, 2]
    infos = [o for batch in batches for o in batch]
    assert sorted(o.key for o in infos) == [f"k{i}" for i in range(7)]
    assert all(o.size == int(o.key[1:]) and o.etag and '"' not in o.etag for o in infos)


def test_blob_list_keeps_awkward_names_intact(blob_env: str, azurite: Azurite) -> None:
    """Names that XML or a URL would mangle come back exactly as written."""
    container = azurite.client(blob_env)
    names = ["a b.bin", "ü/ñ.txt", "x&y<z>.bin", "100%.bin", "q?#.bin", "tab\tname", "+plus"]
    for name in names:
        container.upload_blob(f"odd/{name}", name.encode())
    infos = [o for batch in _list_url(f"{blob_env}/odd") for o in batch]
    assert sorted(o.key for o in infos) == sorted(names)
    assert {o.key: o.size for o in infos} == {n: len(n.encode()) for n in names}
    assert all(o.md5 == hashlib.md5(o.key.encode()).hexdigest() for o in infos)
    for prefix in ("my data", "a+b"):  # a prefix that a query must encode (shared key signs it)
        container.upload_blob(f"{prefix}/x.bin", b"x")
        listed = [o.key for batch in _list_url(f"{blob_env}/{prefix}") for o in batch]
        assert listed == ["x.bin"], prefix


def test_blob_list_of_a_missing_container_names_it(azurite: Azurite, blob_env: str) -> None:
    url = blob_env.rsplit("/", 1)[0] + "/no-such-container"
    with pytest.raises(StoreError) as err:
        _list_url(url)
    assert "no-such-container" in str(err.value) and "ContainerNotFound" in str(err.value)


def test_blob_head_read_range_delete(blob_env: str, azurite: Azurite) -> None:
    container = azurite.client(blob_env)
    data = os.urandom(5000)
    container.upload_blob("d/obj", data)

    async def go() -> None:
        store = open_store(f"{blob_env}/d")
        try:
            assert await store.head("missing") is None
            info = await store.head("obj")
            assert info is not None and info.size == 5000 and info.etag
            assert bytes(await store.read_range("obj", 0, 5000)) == data
            assert bytes(await store.read_range("obj", 5, 17)) == data[5:17]
            assert bytes(await store.read_range("obj", 100, 4096, info.etag)) == data[100:4096]
            with pytest.raises(SourceChangedError, match="obj"):
                await store.read_range("obj", 0, 10, "0x8DEADBEEF000000")
            # The real case: the object is replaced between listing and reading.
            await asyncio.to_thread(container.upload_blob, "d/obj", b"new", overwrite=True)
            with pytest.raises(SourceChangedError) as err:
                await store.read_range("obj", 0, 3, info.etag)
            assert "d/obj" in str(err.value) and "changed" in str(err.value)
            with pytest.raises(StoreError):
                await store.read_range("missing", 0, 3)
            await store.delete("obj")
            assert await store.head("obj") is None
            await store.delete("obj")  # a missing object is not an error
        finally:
            await store.close()

    run(go())
    assert [b.name for b in container.list_blobs()] == []


def _sas_with(azurite: Azurite, container: str, needle: str) -> str:
    """A read/list SAS whose (encoded) signature contains ``needle`` and not the other of
    '+' and '/' (found by varying the expiry: the signature is an HMAC)."""
    base = dt.datetime(2099, 1, 1, tzinfo=dt.UTC)
    for i in range(500):
        sas = azurite.sas(container, expiry=base + dt.timedelta(seconds=i), read=True, list=True)
        signature = sas.split("sig=")[1]
        other = "%2F" if needle == "%2B" else "%2B"
        if needle in signature and other not in signature:
            return sas
    raise AssertionError(f"no SAS with {needle!r} in its signature")


@pytest.mark.parametrize("needle", ["%2B", "%2F"])
def test_blob_store_with_a_sas_url(azurite: Azurite, needle: str) -> None:
    """A SAS URL (no other credential) reaches Azurite for listing and for reading, whatever
    characters the signature holds."""
    container = azurite.container()
    container.upload_blob("p/obj", b"payload")
    sas = _sas_with(azurite, container.container_name, needle)
    url = f"{azurite.endpoint}/{container.container_name}/p?{sas}"

    async def go() -> tuple[list[list], bytes]:
        store = open_store(url)
        try:
            assert "sig" not in str(store)
            return await _listing(store), bytes(await store.read_range("obj", 0, 7))
        finally:
            await store.close()

    batches, data = run(go())
    assert [o.key for b in batches for o in b] == ["obj"]
    assert data == b"payload"


@pytest.mark.parametrize("verb", ["stage", "verify"])
def test_no_credentials_at_all_is_one_clear_error_at_once(tmp_path: Path, verb: str) -> None:
    """The listing's SDK retried a failed Azure AD sign-in for ~90 s, and azure-identity printed
    its whole credential chain at each try, then asyncio its unclosed sessions."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("AZURE_")}
    env["AZURE_TOKEN_CREDENTIALS"] = "EnvironmentCredential"  # no sign-in to be had here
    out = subprocess.run(
        [
            str(Path(sys.executable).parent / "stoker"),
            verb,
            "https://someacct.blob.core.windows.net/cont/p",
            str(tmp_path),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2, out.stderr
    assert "found no credentials" in out.stderr and "AZURE_STORAGE_CONNECTION_STRING" in out.stderr
    assert out.stderr.count("\n") == 1, out.stderr  # no chain, no unclosed-session warnings


@pytest.mark.parametrize("endpoint", ["notaurl", "ftp://host/acct", "https://"])
def test_a_connection_strings_endpoint_that_is_no_url_is_named(
    monkeypatch: pytest.MonkeyPatch, endpoint: str
) -> None:
    """It reached obstore, whose parse error came out as a traceback with a Rust dump."""
    monkeypatch.setenv(
        "AZURE_STORAGE_CONNECTION_STRING",
        f"AccountName=acct;AccountKey=QWNjb3VudEtleQ==;BlobEndpoint={endpoint}",
    )
    with pytest.raises(StoreError, match=r"BlobEndpoint in AZURE_STORAGE_CONNECTION_STRING .*"):
        open_store("az://cont/p")


@pytest.mark.parametrize(
    ("env", "named"),
    [
        (
            {"AZURE_STORAGE_CONNECTION_STRING": "AccountName=acct;AccountKey=s3cr*t!key"},
            "AccountKey",
        ),
        ({"AZURE_STORAGE_ACCOUNT": "acct", "AZURE_STORAGE_KEY": "s3cr*t!key"}, "AZURE_STORAGE_KEY"),
    ],
)
def test_an_account_key_that_is_not_base64_is_named_without_showing_it(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], named: str
) -> None:
    """It reached obstore: every request failed with a Rust dump, exit 1."""
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(StoreError, match=rf"^{named}.* is not an account key") as err:
        open_store("az://cont/p")
    assert "s3cr" not in str(err.value)


def test_plain_http_without_a_key_or_sas_says_azure_ad_needs_https(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Azure AD was tried over http: the SDK's ValueError came out as a traceback, exit 1."""
    monkeypatch.delenv("AZURE_STORAGE_CONNECTION_STRING", raising=False)
    with pytest.raises(StoreError, match="no account key or SAS was found for account 'other'"):
        open_store("http://127.0.0.1:10000/other/cont/p")


@pytest.mark.parametrize("name", ["UPPER", "ab", "x_y", "-ab", "a--b", "a" * 64])
def test_a_container_name_azure_refuses_is_named_with_the_rule(name: str) -> None:
    with pytest.raises(StoreError, match=rf"'{name}' is not a container name \(3-63 lowercase"):
        open_store(f"https://acct.blob.core.windows.net/{name}/prefix")


def test_the_store_reaches_into_no_private_part_of_the_azure_sdk() -> None:
    """The listing went through the SDK's private ``_client``: a release could move it."""
    import re

    import stoker.store

    for source in sorted(Path(stoker.store.__file__).parent.glob("*.py")):
        text = source.read_text()
        found = re.findall(r"\w+\)?\._(?:client|pipeline|config)\b", text)
        assert not found, f"{source.name}: {found}"
        assert not re.search(r"azure\.\w+(\.\w+)*\._\w+", text), source.name  # private modules


# ------------------------------------------------------------------------------ ranged reads
def test_fetch_ranges_skips_finished_ranges_and_reports_each_one(tmp_path: Path) -> None:
    from stoker.store._download import fetch_ranges
    from stoker.store._posix import PosixStore

    data = os.urandom(10_000)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "obj").write_bytes(data)
    store = PosixStore(tmp_path / "src")
    got = bytearray(len(data))
    done: list[tuple[int, int, int]] = []

    def sink(pos: int, piece: bytes | memoryview) -> None:
        got[pos : pos + len(piece)] = piece

    async def mark(i: int, start: int, end: int) -> None:
        done.append((i, start, end))

    asyncio.run(
        fetch_ranges(store, "obj", len(data), sink, range_size=3000, skip={1}, range_done=mark)
    )
    assert sorted(done) == [(0, 0, 3000), (2, 6000, 9000), (3, 9000, 10_000)]
    assert got[:3000] == data[:3000] and got[6000:] == data[6000:]
    assert got[3000:6000] == bytes(3000)  # range 1 was skipped


def test_fetch_ranges_spans_several_ranges_per_request_and_reports_each_as_it_passes(
    tmp_path: Path,
) -> None:
    """Four ranges a request: fewer, larger requests, split where a range was finished before;
    each range is reported when the stream passes its end, not when its request ends."""
    from stoker.store._download import fetch_ranges, requests_for
    from stoker.store._posix import PosixStore

    assert requests_for(10, {4}, 4) == [[0, 1, 2, 3], [5, 6, 7, 8], [9]]
    assert requests_for(3, (), 1) == [[0], [1], [2]]
    data = os.urandom(10_000)
    (tmp_path / "obj").write_bytes(data)
    asked: list[tuple[int, int]] = []
    events: list[tuple[str, int]] = []

    class Pieces(PosixStore):  # 500-byte pieces, each request recorded
        async def read_chunks(self, key, start, end, etag=None):  # noqa: ANN001, ANN202
            asked.append((start, end))
            for pos in range(start, end, 500):
                await asyncio.sleep(0)  # (a network read lets the loop run between pieces)
                yield data[pos : min(end, pos + 500)]

    got = bytearray(len(data))

    def sink(pos: int, piece: bytes | memoryview) -> None:
        got[pos : pos + len(piece)] = piece
        events.append(("piece", pos))

    async def mark(i: int, start: int, end: int) -> None:
        events.append(("done", i))

    asyncio.run(
        fetch_ranges(
            Pieces(tmp_path),
            "obj",
            len(data),
            sink,
            range_size=1000,
            skip={4},
            range_done=mark,
            per_request=4,
            in_flight=1,
        )
    )
    assert asked == [(0, 4000), (5000, 9000), (9000, 10_000)]
    assert got[:4000] == data[:4000] and got[5000:] == data[5000:]
    assert sorted(i for kind, i in events if kind == "done") == [0, 1, 2, 3, 5, 6, 7, 8, 9]
    # range 0 was reported before its request's last piece (at 3,500) was handed over
    assert events.index(("done", 0)) < events.index(("piece", 3500))


def test_fetch_ranges_records_the_finished_ranges_of_a_request_that_fails(tmp_path: Path) -> None:
    """A request that fails in its third range has reported its first two (a re-run skips them)
    and has let their reports finish before the error is raised."""
    from stoker.store._download import fetch_ranges
    from stoker.store._posix import PosixStore

    (tmp_path / "obj").write_bytes(os.urandom(4000))
    finished: list[int] = []

    def sink(pos: int, piece: bytes | memoryview) -> None:
        if pos >= 2000:
            raise OSError(28, "No space left on device")

    async def mark(i: int, start: int, end: int) -> None:
        await asyncio.sleep(0.05)  # still running when the failure comes
        finished.append(i)

    class Pieces(PosixStore):
        async def read_chunks(self, key, start, end, etag=None):  # noqa: ANN001, ANN202
            for pos in range(start, end, 1000):
                yield b"x" * min(1000, end - pos)

    with pytest.raises(OSError, match="No space"):
        asyncio.run(
            fetch_ranges(
                Pieces(tmp_path),
                "obj",
                4000,
                sink,
                range_size=1000,
                range_done=mark,
                per_request=4,
            )
        )
    assert finished == [0, 1]


def test_fetch_ranges_raises_the_first_failure_after_every_range_stopped(tmp_path: Path) -> None:
    from stoker.store._download import fetch_ranges
    from stoker.store._posix import PosixStore

    (tmp_path / "obj").write_bytes(os.urandom(8000))
    store = PosixStore(tmp_path)
    seen: list[int] = []

    def sink(pos: int, piece: bytes | memoryview) -> None:
        seen.append(pos)
        if pos == 2000:
            raise OSError(28, "No space left on device")

    async def go() -> None:
        await fetch_ranges(store, "obj", 8000, sink, range_size=1000, in_flight=1)

    with pytest.raises(OSError, match="No space"):
        asyncio.run(go())
    assert seen == [0, 1000, 2000]  # the ranges after the failure were not fetched


def test_fetch_ranges_from_an_offset_hands_over_each_pieces_place_in_the_object(
    tmp_path: Path,
) -> None:
    from stoker.store._download import fetch_ranges
    from stoker.store._posix import PosixStore

    data = os.urandom(5000)
    (tmp_path / "obj").write_bytes(data)
    got: dict[int, bytes] = {}
    done: list[tuple[int, int, int]] = []

    def sink(pos: int, piece: bytes | memoryview) -> None:
        got[pos] = bytes(piece)

    asyncio.run(
        fetch_ranges(
            PosixStore(tmp_path), "obj", 4500, sink, start=1000, range_size=1500,
            range_done=lambda i, a, b: done.append((i, a, b)),
        )
    )  # fmt: skip
    assert sorted(done) == [(0, 1000, 2500), (1, 2500, 4000), (2, 4000, 4500)]
    assert b"".join(got[p] for p in sorted(got)) == data[1000:4500]
