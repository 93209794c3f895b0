"""Steady state in words: what :func:`benchlib.stats.steady.run_steadiness` found of one run."""

from __future__ import annotations

from benchlib.stats.steady import RunSteadiness


def steadiness_note(judged: RunSteadiness, unit: str = "interval") -> str:
    """Say a run's steadiness: how many rounds, where it was steady, or how far from it the last window was.

    ``unit``: what one round is (``"whole second"``); a steady window is said in its last word
    ("second 4 to 8 of 10").
    """
    n, window = judged.rounds, judged.window
    if judged.state == "too short to assess":
        return f"{n} {unit}{'' if n == 1 else 's'}; the PTS window needs {window}"
    if judged.state == "not steady":
        return (
            f"no {window}-round window within 20% range and 10% excursion (last: range "
            f"{100 * judged.last_range:.0f}%, excursion {100 * judged.last_excursion:.0f}%)"
        )
    said = "round" if unit == "interval" else unit.split()[-1]
    end = judged.steady_from
    return f"steady from {said} {end - window + 2} to {end + 1} of {n}"
