"""A Mozilla application (Firefox ESR, Thunderbird ESR) run headless for a test under Marionette: a fresh profile
(prefs in user.js, the dev CA in its NSS store), started with Marionette on a given port, stopped by pid. Imported by
webpush_firefox.py and imap_thunderbird.py (their folder is on sys.path)."""
import json
import os
import shutil
import signal
import socket
import subprocess
import time

from marionette_driver.marionette import Marionette


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# What every application here is told: no telemetry, updates, remote settings or network checks of its own.
QUIET_PREFS = {
    "datareporting.policy.dataSubmissionEnabled": False,
    "datareporting.healthreport.uploadEnabled": False,
    "toolkit.telemetry.reportingpolicy.firstRun": False,
    "app.update.disabledForTesting": True,
    "extensions.update.enabled": False,
    "services.settings.server": "data:,",
    "network.captive-portal-service.enabled": False,
    "network.connectivity-service.enabled": False,
    "network.dns.disablePrefetch": True,
}


def fresh_profile(directory, marker, prefs, ca, ca_nickname, marionette_port):
    """Empties DIRECTORY (only if it is empty or holds the file MARKER, which a profile made here has), writes
    QUIET_PREFS, Marionette's port and the application's PREFS to user.js, and makes an NSS database that trusts the
    CA file CA for TLS servers."""
    if os.path.isdir(directory) and os.listdir(directory):
        if not os.path.exists(os.path.join(directory, marker)):
            raise SystemExit(f"{directory} is not empty and was not made by this script; refusing to clear it")
        shutil.rmtree(directory)
    os.makedirs(directory, exist_ok=True)
    open(os.path.join(directory, marker), "w").close()
    with open(os.path.join(directory, "user.js"), "w") as f:
        for name, value in {**QUIET_PREFS, "marionette.port": marionette_port, **prefs}.items():
            f.write(f"user_pref({json.dumps(name)}, {json.dumps(value)});\n")
    nss = "sql:" + directory
    subprocess.run(["certutil", "-N", "-d", nss, "--empty-password"], check=True, capture_output=True)
    subprocess.run(["certutil", "-A", "-d", nss, "-n", ca_nickname, "-t", "C,,", "-i", ca],
                   check=True, capture_output=True)


def start(command, log_path, marionette_port, deadline):
    """Starts COMMAND (the application with --headless --marionette and its profile) in a process group of its own,
    its output in LOG_PATH; waits until Marionette listens on MARIONETTE_PORT (until DEADLINE, monotonic), then
    opens a session. Returns (process, client); raises RuntimeError if the application exits or never listens."""
    env = dict(os.environ, MOZ_HEADLESS="1", MOZ_CRASHREPORTER_DISABLE="1")
    with open(log_path, "wb") as out:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                                   start_new_session=True)
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"{command[0]} exited with {process.returncode} during startup")
        try:
            with socket.create_connection(("127.0.0.1", marionette_port), timeout=1):
                break
        except OSError:
            if time.monotonic() > deadline:
                stop(process)
                raise RuntimeError("Marionette did not start listening")
            time.sleep(0.2)
    client = Marionette(host="127.0.0.1", port=marionette_port)
    client.start_session()
    return process, client


def stop(process):
    """Stops the application by pid: SIGTERM, then SIGKILL to its process group (its child processes) if it lingers."""
    if process is None:
        return
    if process.poll() is None:
        try:
            process.terminate()
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
