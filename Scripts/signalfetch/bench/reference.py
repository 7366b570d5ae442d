"""The reference clients (aioapns, firebase-admin, pywebpush) and their runs (the scripts in signalfetch/peers/, each
printing one JSON result line), with the Python of the project's test venv, which holds them."""
from .. import peer_path, test_python
from .. import measure


def run(script, *args):
    """One run of a reference client (peers/SCRIPT) with `args`; its JSON result."""
    return measure.run_json([test_python(), peer_path(script), *[str(a) for a in args]])
