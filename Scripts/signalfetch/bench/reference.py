"""The reference clients (aioapns, firebase-admin, pywebpush) and their runs: the tests' peers in Tests/Peers, each run
in its `load` mode and printing one JSON result line, with the Python of the project's test venv, which holds them."""
from .. import peer_path, test_python
from .. import measure


def run(script, *args):
    """One run of a reference client (Tests/Peers/SCRIPT in its load mode) with `args`; its JSON result."""
    return measure.run_json([test_python(), peer_path(script), "load", *[str(a) for a in args]])
