"""Sizes, rates, durations and counts as people write them, and back again."""

from __future__ import annotations

import math

import pytest

from stoker.errors import StokerError, UnitError
from stoker.units import (
    format_bytes,
    format_duration,
    format_rate,
    parse_bytes,
    parse_count,
    parse_duration,
    parse_rate,
)

# ------------------------------------------------------------------------------------ sizes


@pytest.mark.parametrize(
    "text, expected",
    [
        ("28 TiB", 28 * 2**40),
        ("2.5 PB", 2.5e15),
        ("512 MB", 512e6),
        ("4000 MiB", 4000 * 2**20),
        ("1 GiB", 2**30),
        ("10 KB", 10e3),
        ("10 kB", 10e3),
        ("1 EiB", 2**60),
        ("1024", 1024.0),  # a bare number is bytes
        ("1024 B", 1024.0),
        ("8 Gb", 1e9),  # gigabits: 8e9 bits = 1e9 bytes
        ("8 Gbit", 1e9),
        ("16 bits", 2.0),
        ("28TiB", 28 * 2**40),
        ("  28 TiB  ", 28 * 2**40),
        ("1_000 B", 1000.0),
        ("1,000 GB", 1e12),
        (".5 GB", 0.5e9),
        ("1e3 GB", 1e12),
    ],
)
def test_parse_bytes(text, expected):
    assert parse_bytes(text) == pytest.approx(expected, rel=1e-12)


def test_binary_and_decimal_prefixes_differ():
    assert parse_bytes("1 TiB") / parse_bytes("1 TB") == pytest.approx(2**40 / 1e12)
    assert parse_bytes("1 PiB") != parse_bytes("1 PB")


def test_bits_and_bytes_differ_by_case():
    assert parse_bytes("1 GB") == 8 * parse_bytes("1 Gb")


@pytest.mark.parametrize("number", [0, 7, 1.5, 28 * 2**40])
def test_numbers_are_base_units(number):
    for parse in (parse_bytes, parse_rate, parse_duration, parse_count):
        value = parse(number)
        assert value == float(number)
        assert isinstance(value, float)


# ------------------------------------------------------------------------------------ rates


@pytest.mark.parametrize(
    "text, expected",
    [
        ("400 Gb/s", 50e9),  # bits
        ("400 Gbps", 50e9),
        ("400 Gbit/s", 50e9),
        ("400 Gb / s", 50e9),
        ("10 GB/s", 10e9),  # bytes
        ("10 GBps", 10e9),
        ("125 MiB/s", 125 * 2**20),
        ("12.5 GB/sec", 12.5e9),
        ("80 Gb/s", 10e9),
        ("3.6 TB/h", 1e9),  # per hour
        ("1 Kib/s", 128.0),
    ],
)
def test_parse_rate(text, expected):
    assert parse_rate(text) == pytest.approx(expected, rel=1e-12)


def test_rate_bits_versus_bytes():
    assert parse_rate("400 Gb/s") == 50_000_000_000.0
    assert parse_rate("400 GB/s") == 400e9
    assert parse_rate("400 Gbps") == parse_rate("400 Gb/s")
    assert parse_rate("400 GBps") == parse_rate("400 GB/s")


@pytest.mark.parametrize(
    "text", ["80 Gbs", "10 GB", "400", "400 Gb/min", "fast", "GB/s", "10 gb/s", "10 GiBs"]
)
def test_parse_rate_refuses(text):
    with pytest.raises(UnitError) as info:
        parse_rate(text)
    message = str(info.value)
    assert repr(text) in message  # names the bad text
    assert "400 Gb/s" in message  # shows how to write one


# ------------------------------------------------------------------------------------ durations


@pytest.mark.parametrize(
    "text, expected",
    [
        ("90 s", 90.0),
        ("90", 90.0),
        ("14 min", 840.0),
        ("3.1 h", 11160.0),
        ("54 d", 54 * 86400.0),
        ("1.5h", 5400.0),
        ("10 minutes", 600.0),
        ("2 weeks", 14 * 86400.0),
        ("450 ms", 0.45),
        ("9.6 us", 9.6e-6),
        ("50677 h", 50677 * 3600.0),
    ],
)
def test_parse_duration(text, expected):
    assert parse_duration(text) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("text", ["5 parsecs", "1 M", "3 H", "soon", "h", ""])
def test_parse_duration_refuses(text):
    with pytest.raises(UnitError) as info:
        parse_duration(text)
    assert repr(text) in str(info.value)
    assert "14 min" in str(info.value)


# ------------------------------------------------------------------------------------ counts


@pytest.mark.parametrize(
    "text, expected",
    [
        ("405B", 405e9),
        ("15T", 15e12),
        ("2.5M", 2.5e6),
        ("25.6M", 25.6e6),
        ("70B", 70e9),
        ("8 B", 8e9),
        ("10k", 1e4),
        ("1e9", 1e9),
        ("2048", 2048.0),
    ],
)
def test_parse_count(text, expected):
    assert parse_count(text) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("text", ["405 X", "5b", "15 TB", "lots", ""])
def test_parse_count_refuses(text):
    with pytest.raises(UnitError) as info:
        parse_count(text)
    assert repr(text) in str(info.value)
    assert "405B" in str(info.value)


# ------------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    "text", ["60 TBB", "28 TB/s", "400 Gb/s", "5 gb", "28 TiBs", "TiB", "", "   ", "twenty GB"]
)
def test_parse_bytes_refuses(text):
    with pytest.raises(UnitError) as info:
        parse_bytes(text)
    message = str(info.value)
    assert repr(text) in message
    assert "28 TiB" in message  # an example of a size that works


@pytest.mark.parametrize("parse", [parse_bytes, parse_rate, parse_duration, parse_count])
@pytest.mark.parametrize("value", [True, False, None, [1], {"GB": 1}, b"1 GB"])
def test_bools_none_and_other_types_are_refused(parse, value):
    with pytest.raises(UnitError) as info:
        parse(value)
    assert repr(value) in str(info.value)
    assert "such as" in str(info.value)


@pytest.mark.parametrize("parse", [parse_bytes, parse_rate, parse_duration, parse_count])
@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_non_finite_numbers_are_refused(parse, value):
    with pytest.raises(UnitError, match="finite"):
        parse(value)


@pytest.mark.parametrize(
    "parse, text",
    [
        (parse_bytes, "1e999 GB"),
        (parse_rate, "1e999 GB/s"),
        (parse_duration, "1e999 s"),
        (parse_count, "1e999"),
    ],
)
def test_non_finite_text_is_refused_like_non_finite_numbers(parse, text):
    # float("1e999") is inf: a string must not slip past the finiteness check numbers get.
    with pytest.raises(UnitError):
        parse(text)


def test_unit_error_is_a_stoker_error_and_a_value_error():
    with pytest.raises(StokerError):
        parse_bytes("60 TBB")
    with pytest.raises(ValueError):
        parse_bytes("60 TBB")


# ------------------------------------------------------------------------------------ formatting


@pytest.mark.parametrize(
    "value, binary, expected",
    [
        (28 * 2**40, True, "28 TiB"),
        (0, True, "0 B"),
        (512, True, "512 B"),
        (1024, True, "1 KiB"),
        (1536, True, "1.5 KiB"),
        (1.5 * 2**30, True, "1.5 GiB"),
        (2.5e15, False, "2.5 PB"),
        (512e6, False, "512 MB"),
        (1234567, False, "1.23 MB"),
        (80e9, False, "80 GB"),
    ],
)
def test_format_bytes(value, binary, expected):
    assert format_bytes(value, binary=binary) == expected


@pytest.mark.parametrize(
    "value, expected",
    [(50e9, "50 GB/s"), (12.5e9, "12.5 GB/s"), (125 * 2**20, "131 MB/s"), (400, "400 B/s")],
)
def test_format_rate(value, expected):
    assert format_rate(value) == expected


@pytest.mark.parametrize(
    "value, expected",
    [
        (90, "1.5 min"),
        (840, "14 min"),
        (11160, "3.1 h"),
        (6.2 * 3600, "6.2 h"),
        (54 * 86400, "54 d"),
        (30, "30 s"),
        (0.45, "450 ms"),
        (5e-6, "5 us"),
        (0, "0 s"),
        (math.inf, "∞"),
    ],
)
def test_format_duration(value, expected):
    assert format_duration(value) == expected


@pytest.mark.parametrize(
    "text, parse, fmt",
    [
        ("28 TiB", parse_bytes, format_bytes),
        ("14 min", parse_duration, format_duration),
        ("3.1 h", parse_duration, format_duration),
        ("12.5 GB/s", parse_rate, format_rate),
        ("54 d", parse_duration, format_duration),
    ],
)
def test_format_round_trips(text, parse, fmt):
    assert fmt(parse(text)) == text
    assert parse(fmt(parse(text))) == pytest.approx(parse(text))


@pytest.mark.parametrize(
    "call, expected",
    [
        (lambda: format_bytes(999_999, binary=False), "1 MB"),
        (lambda: format_bytes(2**20 - 1), "1 MiB"),
        (lambda: format_duration(59.99), "1 min"),
        (lambda: format_duration(3599), "1 h"),
    ],
    ids=["999999 B decimal", "1 MiB - 1 B", "59.99 s", "3599 s"],
)
def test_rounding_carries_into_the_next_unit(call, expected):
    # Three significant figures of 999,999 B is 1,000 kB; it should read 1 MB.
    assert call() == expected


def test_comma_is_a_thousands_separator_only():
    assert parse_bytes("1,000 GB") == 1e12
    with pytest.raises(UnitError, match="1,5 TB"):
        parse_bytes("1,5 TB")
