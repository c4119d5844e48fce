"""Hypothesis timelines of restart-strategy events, shared by the exponential-delay and the state tests."""

from __future__ import annotations

from hypothesis import strategies as st

#: (``"failure"`` or ``"check"``, milliseconds the clock advances before it)
timeline = st.lists(
    st.tuples(st.sampled_from(["failure", "check"]), st.integers(min_value=0, max_value=50_000)), max_size=60
)
