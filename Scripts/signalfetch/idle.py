"""Idle TLS connections held open against one server, as many devices keeping a connection each would: every
connection's handshake is completed and the server verified against the topology's CA, then nothing is sent.

One process holds at most its open-file limit of descriptors, and one source address at most the ephemeral port range
of connections to one server, so `IdleConnections` spreads them over holder processes (`python3 -m signalfetch.idle
HOST PORT CA SOURCE`), at most PER_PROCESS each and at least PROCESSES of them (a handshake costs the client about as
much CPU as the server), every one connecting from a loopback address of its own (127.0.0.2, 127.0.0.3, …).
Handshakes run without blocking, CONCURRENCY in flight per holder, over memory BIOs, so the raw socket stays the
holder's to look at: a held connection is closed once the server ends it (end of stream or a reset).

A holder reads JSON commands on its standard input and answers each with one JSON line on its standard output:

  {"open": N, "timeout": S}   opens N more connections; {"opened", "failed", "errors": {reason: count}, "held",
                              "seconds"}
  {"check": true}             looks at every held connection without blocking; {"open", "closed"}
  {"await_close": S}          waits up to S seconds for the server to end every held connection; {"open", "closed",
                              "last": the monotonic time of the last close seen, or null}

It stops at the end of its input (closing what it holds). Standard library only."""
import errno, json, math, os, resource, selectors, signal, socket, ssl, subprocess, sys, time

from . import SCRIPTS

PER_PROCESS = 5000
PROCESSES = 4  # at least, so handshakes run on every core however few connections a holder keeps
CONCURRENCY = 32
IP_BIND_ADDRESS_NO_PORT = getattr(socket, "IP_BIND_ADDRESS_NO_PORT", 24)


# MARK: - The holder process

class Handshake:
    """One connection from `source` on its way to a completed TLS handshake: connect, then the handshake's flights
    through memory BIOs. `advance` runs whenever the socket is ready for `events`."""

    __slots__ = ("sock", "tls", "incoming", "outgoing", "pending", "events")

    def __init__(self, host, port, source):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.tls, self.pending, self.events = None, b"", selectors.EVENT_WRITE
        try:
            self.sock.setblocking(False)
            # The port is chosen at connect, for the whole 4-tuple: the same source port may serve another server.
            self.sock.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
            self.sock.bind((source, 0))
            code = self.sock.connect_ex((host, port))
            if code not in (0, errno.EINPROGRESS):
                raise OSError(code, os.strerror(code))
        except OSError:
            self.sock.close()
            raise

    def advance(self, context, host):
        """Moves the connection on; True once the handshake is complete and its last flight sent."""
        if self.tls is None:
            code = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if code:
                raise OSError(code, os.strerror(code))
            self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
            self.tls = context.wrap_bio(self.incoming, self.outgoing, server_hostname=host)
        elif self.events == selectors.EVENT_READ:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("the server closed the connection during the handshake")
            self.incoming.write(data)
        if self.pending and not self._flush():
            return False
        try:
            self.tls.do_handshake()
            finished = True
        except ssl.SSLWantReadError:
            finished = False
        self.pending += self.outgoing.read()
        if not self._flush():
            return False
        self.events = selectors.EVENT_READ
        return finished

    def _flush(self):
        """Sends what the handshake wrote; False (waiting to write) while the socket takes only part of it."""
        while self.pending:
            try:
                sent = self.sock.send(self.pending)
            except BlockingIOError:
                self.events = selectors.EVENT_WRITE
                return False
            self.pending = self.pending[sent:]
        return True


def reason(error):
    """A short name for why a connection failed (errors are tallied by it)."""
    if isinstance(error, OSError) and error.errno:
        return errno.errorcode.get(error.errno, str(error.errno))
    return type(error).__name__


def ended(sock):
    """Whether the server has ended this connection (end of stream, reset); never blocks. What it sent meanwhile
    (TLS 1.3 session tickets, a close_notify) is read and dropped."""
    try:
        while True:
            if not sock.recv(65536):
                return True
    except BlockingIOError:
        return False
    except OSError:
        return True


class Holder:
    """The connections one holder process keeps, all from one source address."""

    def __init__(self, host, port, ca, source):
        self.host, self.port, self.source = host, port, source
        self.context = ssl.create_default_context(cafile=ca)
        self.held = []  # Handshake objects whose handshake completed
        self.closed = set()  # indices into held the server has ended

    def open(self, count, timeout):
        """Opens `count` more connections, CONCURRENCY handshakes at a time; those not done within `timeout` s
        count as failed."""
        start = time.monotonic()
        deadline = start + timeout
        selector = selectors.EpollSelector()
        started = opened = 0
        errors = {}

        def fail(error, hs=None):
            errors[reason(error)] = errors.get(reason(error), 0) + 1
            if hs is not None:
                selector.unregister(hs.sock)
                hs.sock.close()

        while opened + sum(errors.values()) < count:
            while len(selector.get_map()) < CONCURRENCY and started < count:
                started += 1
                try:
                    hs = Handshake(self.host, self.port, self.source)
                except OSError as error:
                    fail(error)
                    continue
                selector.register(hs.sock, hs.events, hs)
            if time.monotonic() > deadline:
                for key in list(selector.get_map().values()):
                    fail(TimeoutError(), key.data)
                if started < count:
                    errors["not started"] = count - started
                break
            for key, _ in selector.select(timeout=1.0):
                hs = key.data
                try:
                    done = hs.advance(self.context, self.host)
                except BlockingIOError:
                    continue
                except (OSError, ssl.SSLError) as error:
                    fail(error, hs)
                    continue
                if done:
                    selector.unregister(hs.sock)
                    self.held.append(hs)
                    opened += 1
                else:
                    selector.modify(hs.sock, hs.events, hs)
        selector.close()
        return {"opened": opened, "failed": sum(errors.values()), "errors": errors, "held": len(self.held),
                "seconds": time.monotonic() - start}

    def check(self):
        """Marks the held connections the server has ended; how many are open and closed."""
        for index, hs in enumerate(self.held):
            if index not in self.closed and ended(hs.sock):
                self.closed.add(index)
        return {"open": len(self.held) - len(self.closed), "closed": len(self.closed)}

    def await_close(self, timeout):
        """Waits up to `timeout` s until the server has ended every held connection."""
        deadline = time.monotonic() + timeout
        selector = selectors.EpollSelector()
        last = None
        for index, hs in enumerate(self.held):
            if index not in self.closed:
                selector.register(hs.sock, selectors.EVENT_READ, index)
        while selector.get_map() and time.monotonic() < deadline:
            for key, _ in selector.select(timeout=max(0.0, deadline - time.monotonic())):
                if ended(key.fileobj):
                    last = time.monotonic()
                    self.closed.add(key.data)
                    selector.unregister(key.fileobj)
        selector.close()
        return dict(self.check(), last=last)

    def serve(self, commands, answers):
        """Answers each JSON command line of `commands` with one JSON line on `answers`."""
        for line in commands:
            command = json.loads(line)
            if "open" in command:
                answer = self.open(command["open"], command.get("timeout", 60))
            elif "await_close" in command:
                answer = self.await_close(command["await_close"])
            else:
                answer = self.check()
            answers.write(json.dumps(answer) + "\n")
            answers.flush()


def main():
    host, port, ca, source = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the launcher stops its holders itself
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    Holder(host, port, ca, source).serve(sys.stdin, sys.stdout)


# MARK: - The launcher's side

class LineProcess:
    """A helper process of this package (`python3 -m MODULE ARGS…`): commands on its standard input, one JSON answer
    a line on its standard output, errors in `name`.err under `workdir`; stopped by pid (end of input, then SIGKILL
    if it lingers)."""

    def __init__(self, name, workdir, module, args=(), command=None):
        """`command`, when given, is the whole command line instead (a compiled helper that answers the same way)."""
        self.name = name
        self.err_path = os.path.join(workdir, f"{name}.err")
        env = dict(os.environ, PYTHONPATH=SCRIPTS + os.pathsep + os.environ.get("PYTHONPATH", ""))
        with open(self.err_path, "ab") as err:
            self.popen = subprocess.Popen(
                command or [sys.executable, "-m", module, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=err, env=env, start_new_session=True, text=True)

    def send(self, command):
        self.popen.stdin.write(json.dumps(command) + "\n")
        self.popen.stdin.flush()

    def answer(self):
        line = self.popen.stdout.readline()
        if not line:
            tail = open(self.err_path, errors="replace").read()[-500:]
            raise RuntimeError(f"{self.name} exited ({self.popen.wait()}): {tail}")
        return json.loads(line)

    def stop(self):
        """Ends the process (end of input, then SIGKILL if it lingers); the kernel closes what it held."""
        if self.popen.poll() is None:
            try:
                self.popen.stdin.close()
                self.popen.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                os.kill(self.popen.pid, signal.SIGKILL)
                self.popen.wait()
        self.popen.stdout.close()


class HolderProcess(LineProcess):
    """One holder process, its connections made from `source`."""

    def __init__(self, name, host, port, ca, source, workdir):
        super().__init__(name, workdir, "signalfetch.idle", [host, str(port), ca, source])
        self.source = source


def holder_count(capacity):
    """How many holder processes `capacity` connections are spread over: PROCESSES, or more to keep each within
    PER_PROCESS."""
    return max(1, min(PROCESSES, capacity), math.ceil(capacity / PER_PROCESS))


class Holders:
    """Holder processes that work at the same time, each asked its own command."""

    def __init__(self, holders):
        self.holders = holders
        self.held = 0

    def ask(self, commands):
        """Sends each holder its command, then gathers every answer (the holders work at the same time)."""
        for holder, command in zip(self.holders, commands):
            holder.send(command)
        return [holder.answer() for holder in self.holders]

    def opened(self, answers, seconds):
        """The holders' answers to an open, summed: {"opened", "failed", "errors", "seconds": `seconds`}."""
        self.held = sum(a["held"] for a in answers)
        errors = {}
        for a in answers:
            for key, value in a["errors"].items():
                errors[key] = errors.get(key, 0) + value
        return {"opened": sum(a["opened"] for a in answers), "failed": sum(a["failed"] for a in answers),
                "errors": errors, "seconds": seconds}

    def close(self):
        for holder in self.holders:
            holder.stop()


class IdleConnections(Holders):
    """Up to `capacity` idle TLS connections to 127.0.0.1:`port`, spread evenly over holder processes
    (``holder_count``), the first connecting from 127.0.0.`first_source`, the next from the address after it, and so
    on."""

    def __init__(self, port, ca, capacity, workdir, first_source=2, label="idle"):
        super().__init__([HolderProcess(f"{label}-holder-{i}", "127.0.0.1", port, ca, f"127.0.0.{first_source + i}",
                                        workdir) for i in range(holder_count(capacity))])

    def open_to(self, total, timeout=60):
        """Opens connections until `total` are held (new ones spread evenly); {"opened", "failed", "errors",
        "seconds": wall time from the first connect to the last answer}."""
        more = max(0, total - self.held)
        n = len(self.holders)
        start = time.monotonic()
        answers = self.ask([{"open": more // n + (1 if i < more % n else 0), "timeout": timeout} for i in range(n)])
        return self.opened(answers, time.monotonic() - start)

    def check(self):
        """{"open", "closed"} over every holder, looked at without blocking."""
        answers = self.ask([{"check": True}] * len(self.holders))
        return {"open": sum(a["open"] for a in answers), "closed": sum(a["closed"] for a in answers)}

    def await_close(self, timeout):
        """Waits up to `timeout` s for the server to end every held connection; {"open", "closed", "last": the
        monotonic time of the last close any holder saw, or None}."""
        answers = self.ask([{"await_close": timeout}] * len(self.holders))
        lasts = [a["last"] for a in answers if a["last"] is not None]
        return {"open": sum(a["open"] for a in answers), "closed": sum(a["closed"] for a in answers),
                "last": max(lasts) if lasts else None}



if __name__ == "__main__":
    main()
