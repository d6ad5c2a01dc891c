"""Budget figures in words have the digits that make them true (issue 43, item 10: the
budget refusal said "used 0.0 of your 0.02" when 0.0223 was used)."""

from __future__ import annotations

from nbjobs.units import figure, limit_figure


def test_a_figure_keeps_three_significant_digits_and_never_an_exponent():
    assert figure(0.0223) == "0.0223"
    assert figure(12.5) == "12.5"
    assert figure(2.0) == "2"
    assert figure(1500.0) == "1500"
    assert figure(0.000123) == "0.000123"  # never 1.23e-04


def test_a_figure_beside_a_limit_never_reads_as_the_limit_when_it_is_not():
    # 5.00001 GPU-hours used of 5: over it, so never "used 5 of your 5"
    assert figure(5.00001, against=5) == "5.00001"
    assert figure(4.99999, against=5) == "4.99999"
    assert figure(5.0, against=5) == "5"
    assert figure(0.0223, against=0.02) == "0.0223"


def test_a_limit_is_said_as_configured():
    assert limit_figure(1.2345) == "1.2345"
    assert limit_figure(0.02) == "0.02"
    assert limit_figure(2.5e-05) == "0.000025"
