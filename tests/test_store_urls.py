# ruff: noqa: E501
"""The storage URL forms of the ecosystem (obstore, adlfs, fsspec, Hadoop, the Azure portal),
read by one rule (stoker.store._url's docstring), and every ambiguous or malformed one refused
with the forms that are accepted, never taken as a local path."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from azurite import ACCOUNT
from stoker.cli import app
from stoker.errors import StoreError
from stoker.store import parse_url

runner = CliRunner()
PUBLIC = "https://acct.blob.core.windows.net"


@pytest.fixture
def account(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_NAME", "acct")
    return "acct"


@pytest.mark.parametrize(
    ("url", "endpoint", "container", "prefix"),
    [
        ("az://cont/a/b", PUBLIC, "cont", "a/b/"),
        ("az://cont", PUBLIC, "cont", ""),
        ("abfs://cont/a", PUBLIC, "cont", "a/"),  # fsspec's abfs://CONTAINER/PATH
        ("abfss://cont/a", PUBLIC, "cont", "a/"),
        ("abfss://cont@other.dfs.core.windows.net/a/b", "https://other.blob.core.windows.net", "cont", "a/b/"),
        ("abfs://cont@other.blob.core.windows.net/a", "https://other.blob.core.windows.net", "cont", "a/"),
        ("wasbs://cont@other.blob.core.windows.net/a", "https://other.blob.core.windows.net", "cont", "a/"),
        ("az://cont@other.dfs.core.windows.net", "https://other.blob.core.windows.net", "cont", ""),
        ("https://other.blob.core.windows.net/cont/a", "https://other.blob.core.windows.net", "cont", "a/"),
        ("https://other.dfs.core.windows.net/cont/a", "https://other.blob.core.windows.net", "cont", "a/"),
        ("https://Other.Blob.Core.Windows.Net/cont", "https://other.blob.core.windows.net", "cont", ""),
        ("https://gov.blob.core.usgovcloudapi.net/cont/x", "https://gov.blob.core.usgovcloudapi.net", "cont", "x/"),
        ("https://cnacct.dfs.core.chinacloudapi.cn/cont", "https://cnacct.blob.core.chinacloudapi.cn", "cont", ""),
        ("abfss://cont@cnacct.dfs.core.chinacloudapi.cn/x", "https://cnacct.blob.core.chinacloudapi.cn", "cont", "x/"),
        ("https://zoned.z17.blob.storage.azure.net/cont", "https://zoned.z17.blob.storage.azure.net", "cont", ""),
        ("http://127.0.0.1:10000/devstoreaccount1/cont/p", "http://127.0.0.1:10000/devstoreaccount1", "cont", "p/"),
        ("http://localhost:10000/devstoreaccount1/cont", "http://localhost:10000/devstoreaccount1", "cont", ""),
        ("http://azurite/devstoreaccount1/cont", "http://azurite/devstoreaccount1", "cont", ""),
        ("http://10.0.0.7/devstoreaccount1/cont", "http://10.0.0.7/devstoreaccount1", "cont", ""),
    ],
)  # fmt: skip
def test_each_form_names_its_account_container_and_prefix(
    account: str, url: str, endpoint: str, container: str, prefix: str
) -> None:
    loc = parse_url(url)
    assert (loc.scheme, loc.endpoint, loc.bucket, loc.prefix) == ("az", endpoint, container, prefix)
    host_style = endpoint.startswith("https://")
    want = endpoint.split("//")[1].split(".")[0] if host_style else endpoint.rsplit("/", 1)[1]
    assert loc.account == want
    # str() is the endpoint form, which reads back as the same place
    assert str(parse_url(str(loc))) == str(loc)


def test_the_account_of_az_comes_from_the_environment_as_obstore_and_adlfs_read_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for var in ("AZURE_STORAGE_ACCOUNT_NAME", "AZURE_STORAGE_ACCOUNT"):
        with monkeypatch.context() as m:
            m.setenv(var, "fromenv")
            assert str(parse_url("az://cont/x")) == "https://fromenv.blob.core.windows.net/cont/x"
    # A connection string gives the account and its endpoint (the emulator's, another cloud's)
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", "UseDevelopmentStorage=true")
    loc = parse_url("az://cont/x")
    assert (loc.account, str(loc)) == (ACCOUNT, f"http://127.0.0.1:10000/{ACCOUNT}/cont/x")
    monkeypatch.setenv(
        "AZURE_STORAGE_CONNECTION_STRING",
        "AccountName=gov;AccountKey=a2V5;EndpointSuffix=core.usgovcloudapi.net",
    )
    assert str(parse_url("az://cont")) == "https://gov.blob.core.usgovcloudapi.net/cont"
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT", "gov")  # agrees with it: fine
    assert parse_url("az://cont").account == "gov"


def test_az_without_an_account_in_the_environment_says_where_to_give_it() -> None:
    with pytest.raises(StoreError) as err:
        parse_url("az://cont/x")
    message = str(err.value)
    assert message.startswith("az://cont/x: ")
    assert "AZURE_STORAGE_ACCOUNT_NAME" in message
    assert "https://ACCOUNT.blob.core.windows.net/cont/x" in message


def test_two_accounts_in_the_environment_are_ambiguous(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_NAME", "one")
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", "AccountName=two;AccountKey=a2V5")
    with pytest.raises(StoreError, match="more than one storage account") as err:
        parse_url("az://cont")
    assert "AZURE_STORAGE_ACCOUNT_NAME=one" in str(err.value) and "=two" in str(err.value)
    assert "a2V5" not in str(err.value)
    # A URL that names its account is not ambiguous.
    assert parse_url("https://one.blob.core.windows.net/cont").account == "one"


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("az://acct/datasets/imagenet", "write az://datasets/imagenet"),
        ("az://acct/datasets", "write az://datasets;"),
        ("az://acct", "Name a container there"),
    ],
)
def test_the_earlier_az_account_container_form_is_ambiguous_and_says_how_to_write_it(
    account: str, url: str, says: str
) -> None:
    """az://ACCOUNT/CONTAINER (stoker's form before) would read as a container named like the
    account: where that is the environment's account, neither reading is guessed."""
    with pytest.raises(StoreError, match="ambiguous") as err:
        parse_url(url)
    message = str(err.value)
    assert says in message
    assert f"{PUBLIC}/acct" in message  # the form for a container named like the account


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("az:/acct/cont", "needs '://'"),
        ("az:cont", "needs '://'"),
        ("abfss:/cont", "needs '://'"),
        ("https:/acct.blob.core.windows.net/c", "needs '://'"),
        ("s3:bucket/x", "needs '://'"),
        ("htps://acct.blob.core.windows.net/cont", "did you mean https://"),
        ("azz://cont/x", "did you mean az://"),
        ("wasbx://cont/x", "unknown scheme 'wasbx'"),
        ("az://", "names no container"),
        ("az:///x", "names no container"),
        ("https://acct.blob.core.windows.net", "names no container"),
        ("https://acct.blob.core.windows.net/", "names no container"),
        ("az://Cont/x", "'Cont' is not a container name"),
        ("az://my_data/x", "'my_data' is not a container name"),
        ("az://acct.blob.core.windows.net/cont", "names a host"),
        ("az://cont:80/x", "names a host"),
        ("abfss://cont@acct.example.com/x", "takes an account's host"),
        ("https://blob.core.windows.net/cont", "not a storage account's Blob host"),
        ("https://acct.file.core.windows.net/share", "not a storage account's Blob host"),
        ("https://storage.example.com/acct/cont", "explicit port"),
        ("https://acct.blob.core.windows.net:99999/cont", "port"),
        ("http://127.0.0.1:10000/devstoreaccount1", "ACCOUNT/CONTAINER"),
        ("file://otherhost/data", "a path on this machine"),
    ],
)
def test_malformed_urls_are_refused_naming_them_and_the_forms(
    account: str, url: str, says: str
) -> None:
    with pytest.raises(StoreError) as err:
        parse_url(url)
    message = str(err.value)
    assert says in message, message
    assert message.startswith(url.rstrip("/").split("?")[0][:10]), message


def test_a_mistyped_url_is_never_a_local_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`stoker stage data az:/account/container` copied into ./az: and exited 0."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "f").write_bytes(b"x")
    for dst in ("az:/account/container", "az:container", "htps://acct.blob.core.windows.net/c"):
        out = runner.invoke(app, ["stage", "data", dst])
        assert out.exit_code == 2, out.output
        assert out.stderr.startswith(f"error: {dst.split('?')[0]}"), out.stderr
        assert "az://CONTAINER/PATH" in out.stderr and "Traceback" not in out.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]  # no az: folder appeared


def test_names_with_a_colon_that_are_no_url_stay_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert parse_url("run:2024").path == tmp_path / "run:2024"
    assert parse_url("./az:/x").path == tmp_path / "az:" / "x"
    assert parse_url(Path("az:cont")).path == tmp_path / "az:cont"


def test_a_container_named_after_the_account_is_reached_through_the_https_form(
    account: str,
) -> None:
    loc = parse_url(f"{PUBLIC}/acct/x")
    assert (loc.account, loc.bucket, loc.prefix) == ("acct", "acct", "x/")


def test_az_against_azurite_stages_and_reads_back(blob_env: str, tmp_path: Path) -> None:
    """The emulator through az://CONTAINER (account and endpoint from the connection string),
    and the same place through its path-style URL: one manifest, nothing copied twice."""
    import stoker

    src = tmp_path / "src"
    src.mkdir()
    (src / "a.bin").write_bytes(b"a" * 1000)
    first = stoker.stage(str(src), f"{blob_env}/p")
    assert first.ok and first.files_copied == 1
    path_style = str(parse_url(f"{blob_env}/p"))
    assert path_style.startswith("http://127.0.0.1:") and path_style.endswith("/p")
    again = stoker.stage(str(src), path_style)
    assert again.ok and again.files_copied == 0 and again.files_skipped == 1
    report = stoker.verify(str(src), f"{blob_env}/p")
    assert report.ok and report.checked == 1


def test_obstores_and_adlfs_variable_names_give_the_key_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from stoker.store import azure_auth

    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_NAME", "acct")
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_KEY", "T2JzdG9yZUtleUtleQ==")
    auth = azure_auth(parse_url("az://cont"))
    assert (auth.account, auth.key) == ("acct", "T2JzdG9yZUtleUtleQ==")
    # The Azure CLI's name for it holding another key: which one is meant is not guessed.
    monkeypatch.setenv("AZURE_STORAGE_KEY", "QW5vdGhlcktleUtleQ==")
    with pytest.raises(StoreError, match="hold different keys") as err:
        azure_auth(parse_url("az://cont"))
    assert "T2Jz" not in str(err.value) and "QW5v" not in str(err.value)


def test_a_connection_string_with_only_a_sas_names_its_account_by_its_endpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from stoker.store import azure_auth

    monkeypatch.setenv(
        "AZURE_STORAGE_CONNECTION_STRING",
        "BlobEndpoint=https://sasacct.blob.core.windows.net/;SharedAccessSignature=sv=1&sig=c2ln",
    )
    loc = parse_url("az://cont/p")
    assert str(loc) == "https://sasacct.blob.core.windows.net/cont/p"
    auth = azure_auth(loc)
    assert (auth.account, auth.sas, auth.key) == ("sasacct", "sv=1&sig=c2ln", None)
    # ...and that SAS is not sent to another account.
    assert azure_auth(parse_url("https://other.blob.core.windows.net/cont")).uses_aad


def test_a_connection_string_that_names_no_account_is_said_to(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", "not a connection string")
    with pytest.raises(StoreError, match="is set but names none"):
        parse_url("az://cont")
