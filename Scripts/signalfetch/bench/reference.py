"""The reference clients (aioapns, firebase-admin, pywebpush): their venv, .venv-bench, and their runs (the scripts
in signalfetch/peers/, each printing one JSON result line)."""
import os
import subprocess
import sys

from .. import ROOT, log, peer_path
from .. import measure


def python():
    """A Python with the reference clients: .venv-bench (created or completed here when one is missing)."""
    venv = os.path.join(ROOT, ".venv-bench")
    interpreter = os.path.join(venv, "bin", "python3")
    if not os.path.exists(interpreter) or subprocess.run(
            [interpreter, "-c", "import aioapns, firebase_admin, pywebpush, aiohttp"], capture_output=True).returncode:
        log("==> preparing .venv-bench with aioapns, firebase-admin and pywebpush")
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        subprocess.run([interpreter, "-m", "pip", "install", "-q", "aioapns", "firebase-admin", "pywebpush",
                        "aiohttp"], check=True)
    return interpreter


def run(script, *args):
    """One run of a reference client (peers/SCRIPT) with `args`; its JSON result."""
    return measure.run_json([python(), peer_path(script), *[str(a) for a in args]])
