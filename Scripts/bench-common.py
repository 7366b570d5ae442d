"""Shared pieces of Scripts/bench and Scripts/drills: processes, ports, the SignalFetch cluster, an HTTPS client,
simulated devices (mail-client processes) and small statistics. Standard library only."""
import base64, hashlib, hmac, http.client, json, os, random, re, resource, selectors, shutil, signal, socket, ssl, subprocess, sys
import tempfile, threading, time, urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOPIC = "com.example.signalfetch"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def log(text):
    print(text, file=sys.stderr, flush=True)


def raise_fd_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=30, proc=None):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{proc.name} exited with status {proc.returncode} before listening on {port}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listening on port {port} after {timeout} s")


# wrk's deliveries: POST /v1/deliveries to user000…user{SCALE_USERS-1} in turn, with the delivery token SCALE_TOKEN.
DELIVERY_LUA = """
local users = tonumber(os.getenv("SCALE_USERS"))
local token = os.getenv("SCALE_TOKEN")
local n = 0
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. token
request = function()
  n = n + 1
  local body = string.format(
    '{"to":"user%03d","from":"bench@example.com","subject":"Scale %d","body":"A short body for message %d."}',
    n % users, n, n)
  return wrk.format(nil, "/v1/deliveries", nil, body)
end
"""

def percentile(values, p):
    if not values:
        return None
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100.0
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def modseq(state):
    """The modseq of an opaque `<epoch>-<modseq>` state (the bench knows the format; clients must not)."""
    return int(str(state).rsplit("-", 1)[1])


def state_tag(signal_key, state):
    """A signal's `st` for `state` under a device's signal key: the first 16 characters of
    base64url(HMAC-SHA256(key, state)), as docs/architecture.md specifies."""
    key = base64.urlsafe_b64decode(signal_key + "=" * (-len(signal_key) % 4))
    mac = hmac.new(key, str(state).encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac).decode().rstrip("=")[:16]


class TagReader:
    """Reads which modseq a signal's tag names, for the drills' ordering checks: it knows each device's keys (from
    the device's own output; one per registration) and the store's epoch, and tries the states up to `top` (a push
    service can do neither)."""

    def __init__(self, keys, epoch, top):
        self.keys, self.epoch, self.top, self.tables = keys, epoch, top, {}

    def modseq(self, token, tag):
        table = self.tables.get(token)
        if table is None:
            table = {state_tag(key, f"{self.epoch}-{m}"): m for key in self.keys.get(token, [])
                     for m in range(self.top + 1)}
            self.tables[token] = table
        return table.get(tag)


class Proc:
    """A child process with its output in files (or a pipe), stopped by pid only."""

    def __init__(self, name, args, workdir, stdin_text=None, stdout_pipe=False, env=None):
        self.name = name
        self.args = args
        self.out_path = os.path.join(workdir, f"{name}.out")
        self.err_path = os.path.join(workdir, f"{name}.err")
        self._err = open(self.err_path, "ab")
        stdout = subprocess.PIPE if stdout_pipe else open(self.out_path, "ab")
        self.popen = subprocess.Popen(
            args, stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL, stdout=stdout,
            stderr=self._err, env=env, start_new_session=True)
        if stdin_text is not None:
            self.popen.stdin.write(stdin_text.encode())
            self.popen.stdin.close()

    @property
    def pid(self):
        return self.popen.pid

    def poll(self):
        return self.popen.poll()

    @property
    def returncode(self):
        return self.popen.returncode

    def stop(self, sig=signal.SIGTERM, timeout=10):
        if self.popen.poll() is None:
            try:
                os.kill(self.popen.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.popen.pid, signal.SIGKILL)
                self.popen.wait()
        return self.popen.returncode

    def kill9(self):
        return self.stop(signal.SIGKILL)

    def first_json_line(self, timeout=30):
        """The first JSON line the process prints on its output file (e.g. `{"port": N}`)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if os.path.exists(self.out_path):
                for line in open(self.out_path):
                    line = line.strip()
                    if line.startswith("{"):
                        return json.loads(line)
            if self.poll() is not None:
                raise RuntimeError(f"{self.name} exited ({self.returncode}): {self.stderr_tail()}")
            time.sleep(0.05)
        raise RuntimeError(f"{self.name} printed nothing in {timeout} s")

    def stderr_tail(self, n=600):
        try:
            return open(self.err_path, errors="replace").read()[-n:]
        except OSError:
            return ""

    def rss_kb(self):
        for line in open(f"/proc/{self.pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return None

    def cpu_seconds(self):
        """utime + stime of the process (all threads), in seconds, from /proc/PID/stat."""
        text = open(f"/proc/{self.pid}/stat").read()
        fields = text[text.rindex(")") + 2:].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK


def bin_dir():
    return os.environ.get("SIGNALFETCH_BIN") or subprocess.run(
        ["swift", "build", "-c", "release", "--show-bin-path"], cwd=ROOT, capture_output=True, text=True,
        check=True).stdout.strip()


class API:
    """A small HTTPS JSON client with one keep-alive connection per thread."""

    def __init__(self, port, ca, host="127.0.0.1", timeout=15):
        self.host, self.port, self.timeout = host, port, timeout
        self.ctx = ssl.create_default_context(cafile=ca)
        self.local = threading.local()

    def _conn(self):
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=self.timeout)
            self.local.conn = conn
        return conn

    def reset(self):
        conn = getattr(self.local, "conn", None)
        if conn is not None:
            conn.close()
        self.local.conn = None

    def raw(self, method, path, token=None, body=None, headers=None):
        """(status, body bytes); raises OSError / http.client exceptions on connection failures."""
        data = json.dumps(body).encode() if body is not None and not isinstance(body, bytes) else body
        h = {"Content-Type": "application/json"} if data is not None else {}
        if token:
            h["Authorization"] = "Bearer " + token
        h.update(headers or {})
        conn = self._conn()
        try:
            conn.request(method, path, body=data, headers=h)
            response = conn.getresponse()
            payload = response.read()
            if response.getheader("connection", "").lower() == "close":
                self.reset()
            return response.status, payload
        except Exception:
            self.reset()
            raise

    def call(self, method, path, token=None, body=None):
        status, payload = self.raw(method, path, token, body)
        try:
            return status, (json.loads(payload) if payload else None)
        except ValueError:
            return status, None

    def login(self, user, password, device="bench"):
        status, body = self.call("POST", "/v1/session", body={"username": user, "password": password,
                                                               "deviceName": device})
        if status != 201:
            raise RuntimeError(f"login {user}: {status} {body}")
        return body["accessToken"]


def http_get(url, timeout=10, ctx=None):
    import urllib.request
    with urllib.request.urlopen(url, timeout=timeout, context=ctx) as r:
        return r.read()


class Cluster:
    """dev-setup, accounts, apns-sim and mailboxd (release binaries) in one temporary folder."""

    def __init__(self, bin_path, prefix="signalfetch-bench-", keep=False):
        self.bin = bin_path
        self.work = tempfile.mkdtemp(prefix=prefix)
        self.data = os.path.join(self.work, "data")
        self.keep = keep
        self.procs = []
        self.apns_sim = None
        self.mailboxd = None
        self.clients = None
        subprocess.run([self.exe("mailboxd"), "dev-setup", "--data-dir", self.data], check=True,
                       stdout=subprocess.DEVNULL)
        self.ca = os.path.join(self.data, "tls/ca.pem")
        self.cert = os.path.join(self.data, "tls/server.pem")
        self.key = os.path.join(self.data, "tls/server.key")
        self.p8 = os.path.join(self.data, "apns/key.p8")
        self.key_id = open(os.path.join(self.data, "apns/key-id")).read().strip()
        self.team_id = open(os.path.join(self.data, "apns/team-id")).read().strip()
        self.delivery_token = open(os.path.join(self.data, "delivery-token")).read().strip()
        self.db = os.path.join(self.data, "mailbox.sqlite")
        self.sim_port = self.device_port = self.api_port = None

    def exe(self, name):
        return os.path.join(self.bin, name)

    def add_accounts(self, users):
        for user in users:
            subprocess.run([self.exe("mailboxd"), "account", "add", user, "--data-dir", self.data],
                           input=f"password-{user}\n", text=True, check=True, stdout=subprocess.DEVNULL)

    def start(self, name, args, **kw):
        proc = Proc(name, args, self.work, **kw)
        self.procs.append(proc)
        return proc

    def start_apns_sim(self, extra=(), provider_port=None, device_port=None):
        self.sim_port = provider_port or self.sim_port or free_port()
        self.device_port = device_port or self.device_port or free_port()
        self.apns_sim = self.start("apns-sim", [
            self.exe("apns-sim"), "--listen", f"127.0.0.1:{self.sim_port}", "--device-listen",
            f"127.0.0.1:{self.device_port}", "--tls-cert", self.cert, "--tls-key", self.key, "--provider-key",
            f"{self.key_id}:{self.team_id}:{os.path.join(self.data, 'apns/key.pub.pem')}", "--topic", TOPIC,
            *extra])
        wait_port(self.device_port, proc=self.apns_sim)
        wait_port(self.sim_port, proc=self.apns_sim)
        return self.apns_sim

    @property
    def sim_url(self):
        return f"http://127.0.0.1:{self.device_port}"

    def start_fcm_sim(self, extra=()):
        """fcm-sim trusting the dev service account, and the --fcm-config that points mailboxd at it."""
        self.fcm_port, self.fcm_device_port = free_port(), free_port()
        self.service_account = os.path.join(self.data, "fcm/service-account.json")
        self.fcm_sim = self.start("fcm-sim", [
            self.exe("fcm-sim"), "--listen", f"127.0.0.1:{self.fcm_port}", "--device-listen",
            f"127.0.0.1:{self.fcm_device_port}", "--tls-cert", self.cert, "--tls-key", self.key,
            "--service-account", self.service_account, *extra])
        wait_port(self.fcm_device_port, proc=self.fcm_sim)
        wait_port(self.fcm_port, proc=self.fcm_sim)
        self.fcm_config = os.path.join(self.work, "fcm-config.json")
        with open(self.fcm_config, "w") as f:
            json.dump({"endpoint": f"https://127.0.0.1:{self.fcm_port}",
                       "tokenURI": f"https://127.0.0.1:{self.fcm_port}/token", "ca": self.ca,
                       "apps": [{"app": TOPIC, "serviceAccountFile": self.service_account}]}, f)
        return self.fcm_sim

    @property
    def fcm_sim_url(self):
        return f"http://127.0.0.1:{self.fcm_device_port}"

    def start_webpush_sim(self, extra=()):
        """webpush-sim on TLS with the dev certificate (push resources, device side, Mozilla protocol), and the
        mailboxd flags that trust it and allow its loopback endpoints."""
        self.webpush_port, self.webpush_device_port = free_port(), free_port()
        self.webpush_sim = self.start("webpush-sim", [
            self.exe("webpush-sim"), "--listen", f"127.0.0.1:{self.webpush_port}", "--device-listen",
            f"127.0.0.1:{self.webpush_device_port}", "--tls-cert", self.cert, "--tls-key", self.key, *extra])
        wait_port(self.webpush_device_port, proc=self.webpush_sim)
        wait_port(self.webpush_port, proc=self.webpush_sim)
        self.vapid_key = os.path.join(self.data, "webpush/vapid.pem")
        self.webpush_flags = ["--webpush-ca", self.ca, "--webpush-allow-host", f"127.0.0.1:{self.webpush_port}",
                              "--webpush-subject", "mailto:bench@example.com"]
        return self.webpush_sim

    @property
    def webpush_sim_url(self):
        return f"http://127.0.0.1:{self.webpush_device_port}"

    def start_mailboxd(self, apns_port=None, extra=()):
        self.api_port = self.api_port or free_port()
        self.metrics_port = getattr(self, "metrics_port", None) or free_port()
        self.mailboxd = self.start("mailboxd", [
            self.exe("mailboxd"), "serve", "--data-dir", self.data, "--listen", f"127.0.0.1:{self.api_port}",
            "--metrics-listen", f"127.0.0.1:{self.metrics_port}",
            "--apns-url", f"https://127.0.0.1:{apns_port or self.sim_port}",
            "--apns-sandbox-url", f"https://127.0.0.1:{apns_port or self.sim_port}", "--apns-ca", self.ca,
            "--apns-topic", TOPIC, *extra])
        wait_port(self.api_port, proc=self.mailboxd)
        return self.mailboxd

    @property
    def api_url(self):
        return f"https://127.0.0.1:{self.api_port}"

    def api(self, timeout=15):
        return API(self.api_port, self.ca, timeout=timeout)

    def healthz(self):
        status, body = self.api(timeout=5).call("GET", "/healthz")
        return body if status == 200 else None

    def metric(self, name):
        # /metrics is on mailboxd's own metrics listener (plain HTTP on loopback), not the API's.
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as answer:
            raw = answer.read()
        total = 0.0
        for line in raw.decode().splitlines():
            if line.startswith(name) and not line.startswith("#"):
                rest = line[len(name):]
                if rest[:1] in (" ", "{"):
                    total += float(line.rsplit(" ", 1)[1])
        return total

    def sim_log(self):
        return json.loads(http_get(self.sim_url + "/sim/log", timeout=30))

    def integrity(self):
        out = subprocess.run(["sqlite3", self.db, "PRAGMA integrity_check"], capture_output=True, text=True)
        return (out.stdout.strip() or out.stderr.strip())

    def close(self):
        if self.clients:
            self.clients.stop()
        for proc in reversed(self.procs):
            proc.stop()
        if not self.keep:
            shutil.rmtree(self.work, ignore_errors=True)


class ScaleCluster(Cluster):
    """The common cluster with its store on a throwaway PostgreSQL (Scripts/postgres-instance) and several mailboxd
    instances sharing it, each on its own port. `api_port` (and so `api()`, `api_url`) takes the instances in turn,
    so loaders and devices spread over all of them."""

    def __init__(self, bin_path, instances=3, prefix="signalfetch-scale-", fast=False):
        super().__init__(bin_path, prefix=prefix)
        os.chmod(self.work, 0o755)  # as root the cluster belongs to the postgres user, who must reach it
        self.pg_dir = os.path.join(self.work, "pg")
        self.database = self.start_database(fast)
        self.ports = [free_port() for _ in range(instances)]
        self.instances = [None] * instances
        self._turn = 0

    @property
    def api_port(self):
        self._turn += 1
        return self.ports[self._turn % len(self.ports)]

    @api_port.setter
    def api_port(self, value):
        pass

    def add_accounts(self, users):
        for user in users:
            subprocess.run([self.exe("mailboxd"), "account", "add", user, "--data-dir", self.data, "--database",
                            self.database], input=f"password-{user}\n", text=True, check=True,
                           stdout=subprocess.DEVNULL)

    def start_instance(self, index, extra=()):
        port = self.ports[index]
        proc = self.start(f"mailboxd-{index}", [
            self.exe("mailboxd"), "serve", "--data-dir", self.data, "--database", self.database, "--instance-id",
            f"m{index}", "--listen", f"127.0.0.1:{port}", "--apns-url", f"https://127.0.0.1:{self.sim_port}",
            "--apns-sandbox-url", f"https://127.0.0.1:{self.sim_port}", "--apns-ca", self.ca, "--apns-topic",
            TOPIC, *extra])
        wait_port(port, proc=proc)
        self.instances[index] = proc
        self.mailboxd = proc
        return proc

    def kill_instance(self, index):
        proc = self.instances[index]
        proc.kill9()
        self.procs.remove(proc)
        self.instances[index] = None

    def start_database(self, fast):
        """Starts the store's PostgreSQL; returns its URL."""
        self.pg_port = free_port()
        started = subprocess.run([os.path.join(ROOT, "Scripts/postgres-instance"), "start", self.pg_dir,
                                  "--port", str(self.pg_port), *(["--fast"] if fast else [])],
                                 capture_output=True, text=True)
        if started.returncode != 0:
            raise RuntimeError(f"PostgreSQL did not start: {started.stderr}")
        return started.stdout.strip()

    def postgres(self, *args):
        return subprocess.run([os.path.join(ROOT, "Scripts/postgres-instance"), *args, self.pg_dir],
                              capture_output=True, text=True)

    def integrity(self):
        out = subprocess.run(["psql", self.database, "-tA", "-c", """
            SELECT (SELECT count(*) FROM messages m JOIN accounts a ON a.id = m.account_id WHERE m.modseq > a.modseq)
                 + (SELECT count(*) FROM tombstones t JOIN accounts a ON a.id = t.account_id WHERE t.modseq > a.modseq)
            """], capture_output=True, text=True)
        value = out.stdout.strip()
        return "ok" if value == "0" else (value or out.stderr.strip())

    def close(self):
        try:
            super().close()
        finally:
            self.postgres("stop")


class FailoverCluster(ScaleCluster):
    """ScaleCluster on a highly available PostgreSQL (Scripts/postgres-cluster: a pg_auto_failover monitor, a primary
    and a synchronous standby), reached through the multi-host URL."""

    def start_database(self, fast):
        base = free_port_run(3)
        started = subprocess.run([os.path.join(ROOT, "Scripts/postgres-cluster"), "start", self.pg_dir,
                                  "--port-base", str(base)], capture_output=True, text=True)
        if started.returncode != 0:
            self.postgres("stop")
            raise RuntimeError(f"the PostgreSQL cluster did not start: {started.stderr}")
        return started.stdout.strip()

    def postgres(self, command, *args):
        return subprocess.run([os.path.join(ROOT, "Scripts/postgres-cluster"), command, self.pg_dir, *args],
                              capture_output=True, text=True)

    def status(self):
        out = self.postgres("status")
        if out.returncode != 0:
            raise RuntimeError(f"postgres-cluster status: {out.stderr}")
        return json.loads(out.stdout)


def free_port_run(length):
    """A port p such that p … p + length - 1 are all free on loopback."""
    for _ in range(50):
        first = free_port()
        if first + length >= 65535:
            continue
        ok = True
        for port in range(first + 1, first + length):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    ok = False
                    break
        if ok:
            return first
    raise RuntimeError(f"no run of {length} free loopback ports")


class Device:
    def __init__(self, name, user):
        self.name, self.user = name, user
        self.token = None
        self.syncs = []  # (monotonic time, modseq, messages)
        self.last_sync = None
        self.last_signal_st = None
        self.signal_keys = []
        self.signals = 0
        self.signal_times = []  # monotonic time of each signal received
        self.errors = []
        self.proc = None


class Fleet:
    """One `mail-client fleet` process running many devices; its lines name their device."""

    def __init__(self, proc):
        self.proc = proc
        self.by_name = {}
        self.buffer = b""


class MailClients:
    """`mail-client run` processes (one per simulated device), or `mail-client fleet` processes (many devices
    each); one thread reads every event line."""

    def __init__(self, cluster, fallback=0, on_sync=None):
        self.cluster = cluster
        self.fallback = fallback
        self.devices = []
        self.by_fd = {}
        self.selector = selectors.DefaultSelector()
        self.lock = threading.Lock()
        self.on_sync = on_sync
        self.running = True
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()
        cluster.clients = self

    def add(self, name, user, service="apns"):
        c = self.cluster
        device = Device(name, user)
        state_dir = os.path.join(c.work, "devices", name)
        if service == "fcm":
            push = ["--service", "fcm", "--sim", c.fcm_sim_url, "--app", TOPIC]
        elif service == "webpush":
            push = ["--service", "webpush", "--sim", c.webpush_sim_url]
        else:
            push = ["--sim", c.sim_url, "--topic", TOPIC]
        device.proc = Proc(f"client-{name}", [
            c.exe("mail-client"), "run", "--server", c.api_url, "--ca", c.ca, *push, "--username",
            user, "--state-dir", state_dir, "--device-name", name, "--fallback-interval",
            str(self.fallback)], c.work, stdin_text=f"password-{user}\n", stdout_pipe=True)
        os.set_blocking(device.proc.popen.stdout.fileno(), False)
        with self.lock:
            self.devices.append(device)
            device.buffer = b""
            self.by_fd[device.proc.popen.stdout.fileno()] = device
            self.selector.register(device.proc.popen.stdout, selectors.EVENT_READ, device)
        return device

    def add_fleet(self, pairs, start_concurrency=16):
        """Devices [(name, user)] in one `mail-client fleet` process."""
        c = self.cluster
        lines = "".join(f"{name} {user} password-{user}\n" for name, user in pairs)
        proc = Proc(f"fleet-{pairs[0][0]}", [
            c.exe("mail-client"), "fleet", "--server", c.api_url, "--ca", c.ca, "--sim", c.sim_url, "--state-dir",
            os.path.join(c.work, "fleet"), "--topic", TOPIC, "--fallback-interval", str(self.fallback),
            "--start-concurrency", str(start_concurrency)], c.work, stdin_text=lines, stdout_pipe=True)
        os.set_blocking(proc.popen.stdout.fileno(), False)
        fleet = Fleet(proc)
        with self.lock:
            for name, user in pairs:
                device = Device(name, user)
                device.proc = proc
                fleet.by_name[name] = device
                self.devices.append(device)
            self.by_fd[proc.popen.stdout.fileno()] = fleet
            self.selector.register(proc.popen.stdout, selectors.EVENT_READ, fleet)
        return fleet

    def _read(self):
        while self.running:
            with self.lock:
                empty = not self.by_fd
            if empty:
                time.sleep(0.05)
                continue
            for key, _ in self.selector.select(timeout=0.1):
                device = key.data
                now = time.monotonic()
                try:
                    chunk = os.read(key.fd, 65536)
                except BlockingIOError:
                    continue
                except OSError:
                    chunk = b""
                if not chunk:
                    with self.lock:
                        self.selector.unregister(key.fileobj)
                        self.by_fd.pop(key.fd, None)
                    continue
                device.buffer += chunk
                *lines, device.buffer = device.buffer.split(b"\n")
                for line in lines:
                    if isinstance(device, Fleet):
                        match = re.search(rb'"device":"([^"]+)"', line)
                        target = device.by_name.get(match.group(1).decode()) if match else None
                        if target:
                            self._event(target, line, now)
                    else:
                        self._event(device, line, now)

    def _event(self, device, line, now):
        try:
            event = json.loads(line)
        except ValueError:
            return
        kind = event.get("event")
        if kind == "registered":
            device.token = event.get("deviceToken")
            if event.get("signalKey"):
                device.signal_keys.append(event["signalKey"])
        elif kind == "signal":
            device.signals += 1
            device.signal_times.append(now)
            device.last_signal_st = (event.get("payload") or {}).get("st")
        elif kind == "sync-done" and event.get("state"):
            device.last_sync = event
            entry = (now, modseq(event["state"]), event.get("messages"))
            device.syncs.append(entry)
            if self.on_sync:
                self.on_sync(device, entry)
        elif kind == "error":
            device.errors.append(event.get("code"))

    def wait_ready(self, timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if all(d.token and d.last_sync for d in self.devices):
                return True
            dead = [d for d in self.devices if d.proc.poll() is not None]
            if dead:
                raise RuntimeError(f"mail-client {dead[0].name} exited: {dead[0].proc.stderr_tail()}")
            time.sleep(0.1)
        missing = [d.name for d in self.devices if not (d.token and d.last_sync)]
        raise RuntimeError(f"{len(missing)} devices never registered and synced, e.g. {missing[:3]}")

    def stop(self):
        self.running = False
        for device in self.devices:
            device.proc.stop(signal.SIGKILL)


def server_states(cluster, users):
    """{user: (modseq, message count)} read from the server."""
    api = cluster.api()
    result = {}
    for user in users:
        token = api.login(user, f"password-{user}", "bench-check")
        ids, cursor, state = [], None, None
        while True:
            path = "/v1/messages?limit=1000" + (f"&cursor={cursor}" if cursor else "")
            status, page = api.call("GET", path, token=token)
            if status != 200:
                raise RuntimeError(f"listing {user}: {status} {page}")
            ids += [m["id"] for m in page["messages"]]
            state = state or page["state"]
            cursor = page.get("nextCursor")
            if not cursor:
                break
        result[user] = (modseq(state), len(ids), set(ids), token)
    return result


def wait_converged(cluster, clients, users, timeout):
    """Waits until every device's cache holds its account's server state; returns (ok, detail)."""
    deadline = time.time() + timeout
    states = server_states(cluster, users)
    while True:
        lagging = []
        for device in clients.devices:
            want_modseq, want_count = states[device.user][0], states[device.user][1]
            got = device.last_sync or {}
            if not got or modseq(got["state"]) != want_modseq or got.get("messages") != want_count:
                lagging.append(device)
        if not lagging:
            return True, f"{len(clients.devices)} devices converged"
        if time.time() > deadline:
            d = lagging[0]
            got = d.last_sync or {}
            return False, (f"{len(lagging)}/{len(clients.devices)} devices not converged, e.g. {d.name}: cache "
                           f"{got.get('state')} ({got.get('messages')} msgs) vs server modseq "
                           f"{states[d.user][0]} ({states[d.user][1]} msgs); last signal st {d.last_signal_st}")
        time.sleep(0.25)


def deliver_body(i, size=600):
    words = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor".split()
    rng = random.Random(i)
    return " ".join(rng.choice(words) for _ in range(size // 6))[:size]
