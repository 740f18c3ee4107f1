"""Measuring memory quality on public benchmarks (recall of evidence per retrieved token)."""
