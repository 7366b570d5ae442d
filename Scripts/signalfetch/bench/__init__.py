"""SignalFetch component benchmarks, each against a baseline measured in the same run: one module per section of
Scripts/bench. `python3 -m signalfetch.bench SECTION --mode quick|full --out DIR` prints one JSON row per figure
(signalfetch.report's format) on standard output."""
