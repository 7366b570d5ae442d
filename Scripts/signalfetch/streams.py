"""Held JMAP event streams (`GET /jmap/eventsource`, RFC 8620 §7.3) against one mailboxd, as awake devices keep
them: each a TLS connection whose handshake is completed and the server verified against the topology's CA, then the
stream's request with a session's bearer token, then nothing but reading.

Like signalfetch.idle, the streams are spread over holder processes (`python3 -m signalfetch.streams HOST PORT CA
SOURCE PATH`), each connecting from a loopback address of its own. A holder reads its sockets all the time, commands
or not, and takes the time each state event arrived from the kernel (SO_TIMESTAMPNS, CLOCK_REALTIME, read with
recvmsg), so the figure is when the bytes reached the client, not when a busy holder got round to them.

A holder reads JSON commands on its standard input and answers each with one JSON line on its standard output:

  {"open": [TOKEN, …], "timeout": S}   opens one stream per token and waits for each one's 200; {"opened",
                                       "failed", "errors": {reason: count}, "held", "seconds"}
  {"arm": true}                        forgets the events seen so far; {"armed": the open streams}
  {"await": S}                         waits up to S seconds until every open stream has had a state event since
                                       the arm; {"times": [for each token ever given, in order, the kernel time
                                       of its stream's first one, or null], "closed"}

It stops at the end of its input (closing what it holds). Standard library only."""
import json, os, resource, selectors, signal, socket, ssl, struct, sys, time

from .idle import CONCURRENCY, Handshake, Holders, LineProcess, holder_count, reason

READ_BYTES = 16384
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
CMSG_SPACE = socket.CMSG_SPACE(16)
EVENT = b"event: state"


# MARK: - The holder process

class Stream:
    """One event stream once its TLS handshake is done: the request written, then the response's head, then events."""

    __slots__ = ("index", "sock", "tls", "incoming", "outgoing", "pending", "head", "buffer", "tail", "first",
                 "closed")

    def __init__(self, index, handshake, request):
        self.index = index
        self.sock, self.tls = handshake.sock, handshake.tls
        self.incoming, self.outgoing = handshake.incoming, handshake.outgoing
        self.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.tls.write(request)
        self.pending = self.outgoing.read()
        self.head, self.buffer, self.tail, self.first, self.closed = None, b"", b"", None, False

    def flush(self):
        """Sends what TLS wrote; True once all of it is sent."""
        while self.pending:
            try:
                sent = self.sock.send(self.pending)
            except BlockingIOError:
                return False
            self.pending = self.pending[sent:]
        return True

    def readable(self):
        """Reads what arrived. Returns the response's status once its head is complete (None before and after);
        records the kernel time of the first state event since the last arm; marks the stream closed at its end."""
        try:
            data, ancdata, _, _ = self.sock.recvmsg(READ_BYTES, CMSG_SPACE)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError:
            data, ancdata = b"", []
        if not data:
            self.closed = True
            return None
        arrived = None
        for level, kind, value in ancdata:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                seconds, nanoseconds = struct.unpack("qq", value[:16])
                arrived = seconds + nanoseconds / 1e9
        self.incoming.write(data)
        plain = b""
        try:
            while True:
                chunk = self.tls.read(READ_BYTES)
                if not chunk:
                    self.closed = True
                    break
                plain += chunk
        except ssl.SSLWantReadError:
            pass
        except (ssl.SSLZeroReturnError, ssl.SSLError):
            self.closed = True
        self.pending += self.outgoing.read()  # a key update's answer, should the server ask for one
        if self.head is None:
            self.buffer += plain
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return None
            self.head = self.buffer[:end]
            plain, self.buffer = self.buffer[end + 4:], b""
            status = self.head.split(b" ", 2)[1].decode(errors="replace") if b" " in self.head else "?"
            self._look(plain, arrived)
            return status
        self._look(plain, arrived)
        return None

    def _look(self, plain, arrived):
        """Whether `plain` (with the end of what came before, an event's name may straddle two reads) names a state
        event."""
        seen = self.tail + plain
        if self.first is None and EVENT in seen:
            self.first = arrived if arrived is not None else time.time()
        self.tail = seen[-len(EVENT):]


class Holder:
    """The streams one holder process keeps, all from one source address, and the commands it is answering."""

    def __init__(self, host, port, ca, source, path):
        self.host, self.port, self.source, self.path = host, port, source, path
        self.context = ssl.create_default_context(cafile=ca)
        self.selector = selectors.EpollSelector()
        self.streams = []
        self.given = 0  # tokens given to `open` so far: a stream's index is its token's place among them
        self.waiting = None  # the deadline of an await being answered

    def request(self, token):
        return (f"GET {self.path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nAccept: text/event-stream\r\n"
                f"Authorization: Bearer {token}\r\n\r\n").encode()

    def open(self, tokens, timeout):
        """Opens one stream per token, CONCURRENCY at a time, and waits for each one's head; those that fail or are
        not answered 200 within `timeout` s are counted by reason."""
        start = time.monotonic()
        deadline = start + timeout
        starting = {}  # socket → (Handshake or Stream, token)
        errors = {}
        opened = 0
        queue = list(reversed(list(enumerate(tokens, self.given))))
        self.given += len(tokens)

        def fail(error, sock=None):
            key = error if isinstance(error, str) else reason(error)
            errors[key] = errors.get(key, 0) + 1
            if sock is not None:
                self.selector.unregister(sock)
                starting.pop(sock, None)
                sock.close()

        while queue or starting:
            while len(starting) < CONCURRENCY and queue:
                index, token = queue.pop()
                try:
                    hs = Handshake(self.host, self.port, self.source)
                except OSError as error:
                    fail(error)
                    continue
                starting[hs.sock] = (hs, (index, token))
                self.selector.register(hs.sock, hs.events, "starting")
            if time.monotonic() > deadline:
                for sock in list(starting):
                    fail(TimeoutError(), sock)
                for _ in queue:
                    fail("not started")
                break
            for key, _ in self.selector.select(timeout=1.0):
                if key.data != "starting":
                    self.service(key)
                    continue
                sock = key.fileobj
                item, (index, token) = starting[sock]
                try:
                    if isinstance(item, Handshake):
                        if not item.advance(self.context, self.host):
                            self.selector.modify(sock, item.events, "starting")
                            continue
                        item = Stream(index, item, self.request(token))
                        starting[sock] = (item, (index, token))
                        item.flush()
                        self.selector.modify(sock, selectors.EVENT_READ, "starting")
                        continue
                    status = item.readable()
                except BlockingIOError:
                    continue
                except (OSError, ssl.SSLError) as error:
                    fail(error, sock)
                    continue
                if item.closed:
                    fail("closed before its head", sock)
                elif status is not None and status != "200":
                    fail(f"HTTP {status}", sock)
                elif status == "200":
                    del starting[sock]
                    self.selector.modify(sock, selectors.EVENT_READ, item)
                    self.streams.append(item)
                    opened += 1
        return {"opened": opened, "failed": sum(errors.values()), "errors": errors, "held": len(self.streams),
                "seconds": time.monotonic() - start}

    def service(self, key):
        """A held stream is readable (or the standard input, handled by the caller's loop)."""
        stream = key.data
        stream.readable()
        if stream.pending:
            stream.flush()
        if stream.closed:
            self.selector.unregister(stream.sock)

    def arm(self):
        for stream in self.streams:
            stream.first = None
        return {"armed": sum(not s.closed for s in self.streams)}

    def heard_all(self):
        return all(s.first is not None or s.closed for s in self.streams)

    def times(self):
        times = [None] * self.given
        for stream in self.streams:
            times[stream.index] = stream.first
        return {"times": times, "closed": sum(s.closed for s in self.streams)}

    def serve(self):
        """Reads the sockets and the commands on standard input together until the input ends."""
        stdin = sys.stdin.fileno()
        os.set_blocking(stdin, False)
        self.selector.register(stdin, selectors.EVENT_READ, "stdin")
        pending = b""
        while True:
            timeout = None if self.waiting is None else max(0.0, self.waiting - time.monotonic())
            for key, _ in self.selector.select(timeout=timeout):
                if key.data != "stdin":
                    self.service(key)
                    continue
                data = os.read(stdin, 65536)
                if not data:
                    return
                pending += data
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    self.command(json.loads(line))
            if self.waiting is not None and (self.heard_all() or time.monotonic() >= self.waiting):
                self.waiting = None
                self.answer(self.times())

    def command(self, command):
        if "open" in command:
            self.answer(self.open(command["open"], command.get("timeout", 120)))
        elif "arm" in command:
            self.answer(self.arm())
        elif "await" in command:
            self.waiting = time.monotonic() + command["await"]

    @staticmethod
    def answer(value):
        sys.stdout.write(json.dumps(value) + "\n")
        sys.stdout.flush()


def main():
    host, port, ca, source, path = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the launcher stops its holders itself
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    Holder(host, port, ca, source, path).serve()


# MARK: - The launcher's side

def undeal(batches, per_holder):
    """Each holder's answers (`per_holder[i]`: one for each token it was given, in order) put back in the order the
    tokens were given: `open` deals each batch of tokens round the holders (token k of a batch to holder k % n), and
    `batches` are those batches' sizes."""
    n, taken, result = len(per_holder), [0] * len(per_holder), []
    for size in batches:
        for k in range(size):
            holder = k % n
            result.append(per_holder[holder][taken[holder] + k // n])
        for holder in range(n):
            taken[holder] += len(range(holder, size, n))
    return result


class EventStreams(Holders):
    """Event streams to 127.0.0.1:`port`, `path`, spread evenly over holder processes (``idle.holder_count`` for
    `capacity`), from 127.0.0.`first_source` onwards."""

    def __init__(self, port, ca, path, capacity, workdir, first_source=2, label="streams"):
        super().__init__([LineProcess(f"{label}-holder-{i}", workdir, "signalfetch.streams",
                                      ["127.0.0.1", str(port), ca, f"127.0.0.{first_source + i}", path])
                          for i in range(holder_count(capacity))])
        self.batches = []  # the token lists given to `open`

    def open(self, tokens, timeout=300):
        """One more stream per token, dealt round the holders; {"opened", "failed", "errors", "seconds"}."""
        n = len(self.holders)
        start = time.monotonic()
        self.batches.append(list(tokens))
        answers = self.ask([{"open": tokens[i::n], "timeout": timeout} for i in range(n)])
        return self.opened(answers, time.monotonic() - start)

    def arm(self):
        return sum(a["armed"] for a in self.ask([{"arm": True}] * len(self.holders)))

    def await_events(self, timeout):
        """For each token given to `open` (all calls, in order), the kernel time of its stream's first state event
        since the arm, or None; and how many streams the server has closed."""
        answers = self.ask([{"await": timeout}] * len(self.holders))
        return undeal([len(b) for b in self.batches], [a["times"] for a in answers]), sum(a["closed"] for a in answers)



if __name__ == "__main__":
    main()
