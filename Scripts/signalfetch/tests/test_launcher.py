"""The launcher stops every process it started when it is told to stop: Ctrl-C (SIGINT), SIGTERM and SIGHUP alike."""
import os, signal, subprocess, sys, tempfile, textwrap, time, unittest

from signalfetch import SCRIPTS

# A launcher as the demo is one: children in their own sessions (out of reach of the terminal's signals), a wait,
# and the cleanup in `finally`.
LAUNCHER = textwrap.dedent("""
    import signal, sys, tempfile
    from signalfetch import harness
    harness.stop_on_termination()
    work = tempfile.mkdtemp()
    children = []
    try:
        children += [harness.Proc(f"sleeper{n}", ["sleep", "600"], work) for n in range(3)]
        # Told only once the cleanup is sure to run: a signal may come the moment the test reads this line.
        print(" ".join(str(child.pid) for child in children), flush=True)
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        for child in children:
            child.stop()
""")


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purpose: read its state.
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split(") ")[-1].split()[0] != "Z"


class LauncherStopsItsChildren(unittest.TestCase):
    def run_and_signal(self, sig):
        env = dict(os.environ, PYTHONPATH=SCRIPTS)
        launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER], stdout=subprocess.PIPE, text=True, env=env)
        pids = [int(pid) for pid in launcher.stdout.readline().split()]
        self.assertEqual(len(pids), 3)
        self.assertTrue(all(alive(pid) for pid in pids))
        launcher.send_signal(sig)
        launcher.wait(timeout=30)
        launcher.stdout.close()
        # The launcher's cleanup waited for each child (Proc.stop), so none is left once it has exited.
        self.assertEqual([pid for pid in pids if alive(pid)], [], f"children left running after {sig.name}")

    def test_ctrl_c(self):
        self.run_and_signal(signal.SIGINT)

    def test_sigterm(self):
        self.run_and_signal(signal.SIGTERM)

    def test_sighup(self):
        self.run_and_signal(signal.SIGHUP)


if __name__ == "__main__":
    unittest.main()
