"""The local topology and what runs it: processes (output in files, stopped by pid only), ports, the dev TLS
material, and `Cluster`, the one launcher of dev-setup, accounts, apns-sim, fcm-sim, webpush-sim, an outbound HTTP
proxy (tinyproxy) and mailboxd (on SQLite, or on PostgreSQL: `ScaleCluster`, `FailoverCluster`), with simulated
devices (`MailClients`: mail-client processes), an HTTPS JSON client and the console's event stream.
Scripts/bench, Scripts/drills, Scripts/demo and the profile all start the topology here. Standard library only."""
import base64, hashlib, hmac, http.client, json, os, random, re, resource, selectors, shutil, signal, socket, ssl
import subprocess, tempfile, threading, time, urllib.parse, urllib.request

from . import ROOT, TOPIC, SCRIPTS
from . import measure


def stop_on_termination():
    """Makes SIGTERM and SIGHUP end the launcher as Ctrl-C does: the handler raises SystemExit (128 + the signal), so
    every `finally` runs and every process the launcher started (each in its own session, out of reach of the
    terminal's signals) is stopped by pid. A process manager, `timeout` and a closed terminal then leave nothing
    running."""
    def stop(signum, _frame):
        raise SystemExit(128 + signum)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)
    # Ctrl-C too, even when the launcher was started with SIGINT ignored (a background job of a script).
    signal.signal(signal.SIGINT, signal.default_int_handler)


def raise_fd_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def free_port():
    """A port free on loopback now, for a server that cannot bind port 0 and say which port it got (PostgreSQL,
    Dovecot, nginx). Our own binaries are started on port 0 and their ports read back (`Proc.listening_ports`): a
    port picked here and released can be taken by another process before the server binds it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


def bin_dir():
    return os.environ.get("SIGNALFETCH_BIN") or subprocess.run(
        ["swift", "build", "-c", "release", "--show-bin-path"], cwd=ROOT, capture_output=True, text=True,
        check=True).stdout.strip()


def modseq(state):
    """The modseq of an opaque `<epoch>-<modseq>` state (the harness knows the format; clients must not), or of an
    IMAP device's state (its mailboxes' lowest HIGHESTMODSEQ, which mailboxd takes from the account's modseq)."""
    if str(state).startswith("imap:"):
        return min(imap_modseqs(state), default=0)
    return int(str(state).rsplit("-", 1)[1])


def imap_modseqs(state):
    """The account modseq each mailbox's HIGHESTMODSEQ stands for in an IMAP device's
    `imap:NAME=UIDVALIDITY.HIGHESTMODSEQ;…` state (mailboxd announces the account's modseq plus one, as a
    mod-sequence is at least 1), the same as the `/v1` state's."""
    entries = str(state)[len("imap:"):].split(";") if str(state).startswith("imap:") else []
    return [int(entry.rsplit(".", 1)[1]) - 1 for entry in entries if "." in entry]


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


# MARK: - Processes

def parse_ports(line):
    """The ports of a server's "listening" line, as `Proc.listening_ports` describes them."""
    ports = {}
    for field in line.split():
        if "://" in field:
            authority = field.split("://", 1)[1].split("/", 1)[0]
            if "url" not in ports and authority.rsplit(":", 1)[-1].isdigit():
                ports["url"] = int(authority.rsplit(":", 1)[-1])
        elif "=" in field:
            name, value = field.split("=", 1)
            if value.rsplit(":", 1)[-1].isdigit():
                ports[name] = int(value.rsplit(":", 1)[-1])
        elif ":" in field and field.rsplit(":", 1)[-1].isdigit():
            ports["address"] = int(field.rsplit(":", 1)[-1])
    return ports


def describe_exit(status):
    """A child's exit as a person reads it: "status 1", or "killed by SIGSEGV"."""
    if status is not None and status < 0:
        try:
            return f"killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"killed by signal {-status}"
    return f"status {status}"


class Proc:
    """A child process with its output in files (or a pipe), stopped by pid only."""

    def __init__(self, name, args, workdir, stdin_text=None, stdout_pipe=False, env=None):
        self.name = name
        self.args = args
        self.out_path = os.path.join(workdir, f"{name}.out")
        self.err_path = os.path.join(workdir, f"{name}.err")
        self._err = open(self.err_path, "ab")
        # Where this run's standard error starts: a process started again under the same name appends to the file.
        self._err_start = self._err.tell()
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

    def listening_ports(self, prefix, timeout=30):
        """The ports a server started on port 0 names in the line starting with `prefix` it writes to standard
        error (e.g. `apns-sim listening provider=127.0.0.1:P device=127.0.0.1:D`): `name=HOST:PORT` fields under
        their name, a URL's port under "url", a bare `HOST:PORT` under "address". Only this run's lines count (an
        earlier run under the same name wrote to the same file). Waits for the line, not for a time; fails if the
        process exits first."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                with open(self.err_path, "rb") as f:
                    f.seek(self._err_start)
                    for line in f.read().decode(errors="replace").splitlines():
                        if line.startswith(prefix):
                            return parse_ports(line)
            except OSError:
                pass
            if self.poll() is not None:
                raise RuntimeError(f"{self.name} exited ({describe_exit(self.returncode)}) before listening: "
                                   f"{self.stderr_tail()}")
            time.sleep(0.02)
        raise RuntimeError(f"{self.name} wrote no '{prefix.strip()}' line in {timeout} s: {self.stderr_tail()}")

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

    def output(self):
        """Everything the process wrote to its output and error files."""
        text = ""
        for path in (self.out_path, self.err_path):
            try:
                text += open(path, errors="replace").read()
            except OSError:
                pass
        return text

    def stderr_tail(self, n=600):
        try:
            return open(self.err_path, errors="replace").read()[-n:]
        except OSError:
            return ""

    def rss_kb(self):
        return measure.rss_kb(self.pid)

    def cpu_seconds(self):
        """utime + stime of the process (all threads), in seconds, from /proc/PID/stat."""
        return measure.process_cpu(self.pid)


# MARK: - HTTPS

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
    with urllib.request.urlopen(url, timeout=timeout, context=ctx) as r:
        return r.read()


# MARK: - The topology

TINYPROXY_CONF = """Port {port}
Listen 127.0.0.1
Allow 127.0.0.1
ConnectPort {connect_port}
MaxClients 100
LogFile "{work}/tinyproxy.log"
LogLevel Info
PidFile "{work}/tinyproxy.pid"
"""


class Cluster:
    """dev-setup, accounts, apns-sim, fcm-sim, webpush-sim, tinyproxy and mailboxd (release binaries) in one
    temporary folder; `keep` leaves the folder behind."""

    def __init__(self, bin_path, prefix="signalfetch-bench-", keep=False):
        self.bin = bin_path
        self.work = tempfile.mkdtemp(prefix=prefix)
        self.data = os.path.join(self.work, "data")
        self.keep = keep
        self.procs = []
        self.apns_sim = None
        self.tinyproxy = None
        self.mailboxd = None
        self.clients = None
        subprocess.run([self.exe("mailboxd"), "dev-setup", "--data-dir", self.data], check=True,
                       stdout=subprocess.DEVNULL)
        self.ca = os.path.join(self.data, "tls/ca.pem")
        self.cert = os.path.join(self.data, "tls/server.pem")
        self.key = os.path.join(self.data, "tls/server.key")
        self.p8 = os.path.join(self.data, "apns/key.p8")
        self.key_id = self.read("apns/key-id")
        self.team_id = self.read("apns/team-id")
        self.delivery_token = self.read("delivery-token")
        self.console_token_file = os.path.join(self.data, "console-token")
        self.db = os.path.join(self.data, "mailbox.sqlite")
        self.sim_port = self.device_port = self.api_port = self.sandbox_port = None
        self.tls_flags = ["--tls-cert", self.cert, "--tls-key", self.key]

    def exe(self, name):
        return os.path.join(self.bin, name)

    def read(self, name):
        """A dev-setup file of the data folder, stripped."""
        return open(os.path.join(self.data, name)).read().strip()

    def account_flags(self):
        return ["--data-dir", self.data]

    def add_accounts(self, users):
        for user in users:
            subprocess.run([self.exe("mailboxd"), "account", "add", user, *self.account_flags()],
                           input=f"password-{user}\n", text=True, check=True, stdout=subprocess.DEVNULL)

    def start(self, name, args, **kw):
        proc = Proc(name, args, self.work, **kw)
        self.procs.append(proc)
        return proc

    def start_sim(self, name, provider_port, device_port, extra):
        """A simulator on TLS with the dev certificate: its provider API on `provider_port`, devices on
        `device_port` (port 0, or None: any free port); returns the process and the ports it listens on, once it
        listens (`provider`, `device` and, where it has them, `sandbox` or `mozilla`)."""
        proc = self.start(name, [self.exe(name), "--listen", f"127.0.0.1:{provider_port or 0}", "--device-listen",
                                 f"127.0.0.1:{device_port or 0}", *self.tls_flags, *extra])
        return proc, proc.listening_ports(f"{name} listening ")

    def start_apns_sim(self, extra=(), provider_port=None, device_port=None, sandbox=False):
        """apns-sim trusting the dev provider key; with `sandbox`, a second provider listener for sandbox tokens.
        Started again, it takes the ports it had (a restart the senders must survive)."""
        if sandbox:
            extra = ["--sandbox-listen", f"127.0.0.1:{self.sandbox_port or 0}", *extra]
        self.apns_sim, ports = self.start_sim(
            "apns-sim", provider_port or self.sim_port, device_port or self.device_port, [
                "--provider-key", f"{self.key_id}:{self.team_id}:{os.path.join(self.data, 'apns/key.pub.pem')}",
                "--topic", TOPIC, *extra])
        self.sim_port, self.device_port = ports["provider"], ports["device"]
        if sandbox:
            self.sandbox_port = ports["sandbox"]
        return self.apns_sim

    @property
    def sim_url(self):
        return f"http://127.0.0.1:{self.device_port}"

    def start_fcm_sim(self, extra=()):
        """fcm-sim trusting the dev service account, and the --fcm-config that points mailboxd at it."""
        self.service_account = os.path.join(self.data, "fcm/service-account.json")
        self.fcm_sim, ports = self.start_sim("fcm-sim", None, None, ["--service-account", self.service_account, *extra])
        self.fcm_port, self.fcm_device_port = ports["provider"], ports["device"]
        self.fcm_config = os.path.join(self.work, "fcm-config.json")
        with open(self.fcm_config, "w") as f:
            json.dump({"endpoint": f"https://127.0.0.1:{self.fcm_port}",
                       "tokenURI": f"https://127.0.0.1:{self.fcm_port}/token", "ca": self.ca,
                       "apps": [{"app": TOPIC, "serviceAccountFile": self.service_account}]}, f)
        return self.fcm_sim

    @property
    def fcm_sim_url(self):
        return f"http://127.0.0.1:{self.fcm_device_port}"

    def start_webpush_sim(self, extra=(), subject="mailto:bench@example.com"):
        """webpush-sim on TLS with the dev certificate (push resources, device side, Mozilla protocol), and the
        mailboxd flags that trust it and allow its loopback endpoints."""
        self.webpush_sim, ports = self.start_sim("webpush-sim", None, None, list(extra))
        self.webpush_port, self.webpush_device_port = ports["provider"], ports["device"]
        self.vapid_key = os.path.join(self.data, "webpush/vapid.pem")
        self.webpush_flags = ["--webpush-ca", self.ca, "--webpush-allow-host", f"127.0.0.1:{self.webpush_port}",
                              "--webpush-subject", subject]
        return self.webpush_sim

    @property
    def webpush_sim_url(self):
        return f"http://127.0.0.1:{self.webpush_device_port}"

    def start_tinyproxy(self, connect_port):
        """Debian's tinyproxy in the foreground on a loopback port of its own (it cannot bind port 0 and say which
        it got): an HTTP proxy for loopback clients that opens CONNECT tunnels to `connect_port` only, its
        configuration, log and pid file in the folder. Returns its URL, for mailboxd's `--push-proxy`."""
        port = free_port()
        conf = os.path.join(self.work, "tinyproxy.conf")
        with open(conf, "w") as f:
            f.write(TINYPROXY_CONF.format(port=port, connect_port=connect_port, work=self.work))
        self.tinyproxy = self.start("tinyproxy", ["tinyproxy", "-d", "-c", conf])
        wait_port(port, proc=self.tinyproxy)
        return f"http://127.0.0.1:{port}"

    def serve_args(self, listen_port, apns_port=None, extra=()):
        """`mailboxd serve` on `listen_port`, its gateway apns-sim (or `apns_port`: a proxy in front of it, or 9
        for none), trusting the dev CA."""
        provider = apns_port or self.sim_port
        sandbox = self.sandbox_port if apns_port is None and self.sandbox_port else provider
        return [self.exe("mailboxd"), "serve", "--data-dir", self.data, "--listen", f"127.0.0.1:{listen_port}",
                "--apns-url", f"https://127.0.0.1:{provider}", "--apns-sandbox-url", f"https://127.0.0.1:{sandbox}",
                "--apns-ca", self.ca, "--apns-topic", TOPIC, *extra]

    def start_mailboxd(self, apns_port=None, extra=()):
        """mailboxd on the ports it had (port 0 the first time) with its metrics listener; returns once it listens.
        Its LMTP and IMAP ports, when `extra` asks for those listeners, are `lmtp_port` and `imap_port`."""
        self.mailboxd = self.start("mailboxd", self.serve_args(
            self.api_port or 0, apns_port,
            ["--metrics-listen", f"127.0.0.1:{getattr(self, 'metrics_port', None) or 0}", *extra]))
        self.api_port = self.mailboxd.listening_ports("mailboxd listening on ")["url"]
        self.metrics_port = self.mailboxd.listening_ports("mailboxd: metrics on ")["url"]
        self.read_mail_ports(self.mailboxd, extra)
        return self.mailboxd

    def read_mail_ports(self, proc, extra):
        """`lmtp_port`, `imap_port` and `jmap_ws_port` read back from a mailboxd started with those listeners in
        `extra`."""
        if "--lmtp-listen" in extra:
            self.lmtp_port = proc.listening_ports("mailboxd: LMTP on ")["address"]
        if "--imap-listen" in extra:
            self.imap_port = proc.listening_ports("mailboxd: IMAP on ")["url"]
        if "--jmap-ws-listen" in extra:
            self.jmap_ws_port = proc.listening_ports("mailboxd: JMAP WebSocket on ")["url"]

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
        raw = http_get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5)
        total = 0.0
        for line in raw.decode().splitlines():
            if line.startswith(name) and not line.startswith("#"):
                rest = line[len(name):]
                if rest[:1] in (" ", "{"):
                    total += float(line.rsplit(" ", 1)[1])
        return total

    def sim_log(self):
        return json.loads(http_get(self.sim_url + "/sim/log", timeout=30))

    def register_devices(self, users, per_account, label, seed=""):
        """`per_account` production APNs devices per account registered through the API (made-up tokens: with no
        gateway their signals wait in the outbox, so every delivery upserts their rows)."""
        api = self.api()
        for user in users:
            token = api.login(user, f"password-{user}", "bench")
            for n in range(per_account):
                device = f"{abs(hash((seed, user, n))) % (1 << 64):016x}" * 4
                status, _ = api.call("POST", "/v1/devices", token=token,
                                     body={"token": device, "topic": TOPIC, "environment": "production"})
                if status != 201:
                    raise RuntimeError(f"{label}: device registration: HTTP {status}")

    def delivery_load_env(self, users):
        """The environment data/deliveries.lua reads (the accounts user000… and the delivery token)."""
        return dict(os.environ, SCALE_USERS=str(len(users)), SCALE_TOKEN=self.delivery_token)

    def integrity(self):
        out = subprocess.run(["sqlite3", self.db, "PRAGMA integrity_check"], capture_output=True, text=True)
        return (out.stdout.strip() or out.stderr.strip())

    def close(self):
        """Stops every process it started (devices first, by pid), then what they stood on (`stop_services`), and
        only then removes the folder: the services' own stop reads their pid files there."""
        try:
            if self.clients:
                self.clients.stop()
            for proc in reversed(self.procs):
                proc.stop()
        finally:
            try:
                self.stop_services()
            finally:
                if not self.keep:
                    shutil.rmtree(self.work, ignore_errors=True)

    def stop_services(self):
        """Stops the servers started by a script rather than as a child (none here; the store's PostgreSQL in
        ScaleCluster)."""


class ScaleCluster(Cluster):
    """The cluster with its store on a throwaway PostgreSQL (Scripts/postgres-instance) and several mailboxd
    instances sharing it, each on its own port. `api_port` (and so `api()`, `api_url`) takes the instances in turn,
    so loaders and devices spread over all of them."""

    server_script = "postgres-instance"

    def __init__(self, bin_path, instances=3, prefix="signalfetch-scale-", fast=False):
        super().__init__(bin_path, prefix=prefix)
        os.chmod(self.work, 0o755)  # as root the cluster belongs to the postgres user, who must reach it
        self.pg_dir = os.path.join(self.work, "pg")
        self.database = self.start_database(fast)
        self.ports = [None] * instances  # each instance's, once it first listens (it keeps it when restarted)
        self.instances = [None] * instances
        self._turn = 0

    @property
    def api_port(self):
        self._turn += 1
        known = [port for port in self.ports if port]
        return known[self._turn % len(known)] if known else None

    @api_port.setter
    def api_port(self, value):
        pass

    def account_flags(self):
        return ["--data-dir", self.data, "--database", self.database]

    def start_instance(self, index, extra=()):
        proc = self.start(f"mailboxd-{index}", self.serve_args(
            self.ports[index] or 0, extra=["--database", self.database, "--instance-id", f"m{index}", *extra]))
        self.ports[index] = proc.listening_ports("mailboxd listening on ")["url"]
        self.read_mail_ports(proc, extra)
        self.instances[index] = proc
        self.mailboxd = proc
        return proc

    def kill_instance(self, index):
        proc = self.instances[index]
        proc.kill9()
        self.procs.remove(proc)
        self.instances[index] = None

    def postmaster_pid(self):
        return int(open(os.path.join(self.pg_dir, "data", "postmaster.pid")).readline())

    def start_database(self, fast):
        """Starts the store's PostgreSQL; returns its URL."""
        self.pg_port = free_port()
        started = subprocess.run([os.path.join(SCRIPTS, self.server_script), "start", self.pg_dir,
                                  "--port", str(self.pg_port), *(["--fast"] if fast else [])],
                                 capture_output=True, text=True)
        if started.returncode != 0:
            raise RuntimeError(f"PostgreSQL did not start: {started.stderr}")
        return started.stdout.strip()

    def postgres(self, *args):
        return subprocess.run([os.path.join(SCRIPTS, self.server_script), *args, self.pg_dir],
                              capture_output=True, text=True)

    def integrity(self):
        out = subprocess.run(["psql", self.database, "-tA", "-c", """
            SELECT (SELECT count(*) FROM messages m JOIN accounts a ON a.id = m.account_id WHERE m.modseq > a.modseq)
                 + (SELECT count(*) FROM tombstones t JOIN accounts a ON a.id = t.account_id WHERE t.modseq > a.modseq)
            """], capture_output=True, text=True)
        value = out.stdout.strip()
        return "ok" if value == "0" else (value or out.stderr.strip())

    def stop_services(self):
        stopped = self.postgres("stop")
        if stopped.returncode != 0:
            raise RuntimeError(f"{self.server_script} stop failed: {stopped.stderr.strip()[-500:]}")


class FailoverCluster(ScaleCluster):
    """ScaleCluster on a highly available PostgreSQL (Scripts/postgres-cluster: a pg_auto_failover monitor, a primary
    and a synchronous standby), reached through the multi-host URL."""

    server_script = "postgres-cluster"

    def start_database(self, fast):
        base = free_port_run(3)
        started = subprocess.run([os.path.join(SCRIPTS, self.server_script), "start", self.pg_dir,
                                  "--port-base", str(base)], capture_output=True, text=True)
        if started.returncode != 0:
            self.postgres("stop")
            raise RuntimeError(f"the PostgreSQL cluster did not start: {started.stderr}")
        return started.stdout.strip()

    def postgres(self, command, *args):
        return subprocess.run([os.path.join(SCRIPTS, self.server_script), command, self.pg_dir, *args],
                              capture_output=True, text=True)

    def status(self):
        out = self.postgres("status")
        if out.returncode != 0:
            raise RuntimeError(f"postgres-cluster status: {out.stderr}")
        return json.loads(out.stdout)


# MARK: - Simulated devices

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
        self.badge = None
        self.live = False
        self.server_streams = 0  # times the device opened the server's event stream (--live)
        self.state_dir = None
        self.service, self.environment = "apns", None
        self.urlsession = False  # talks to the API through URLSession (--transport urlsession)
        self.proc = None
        self.buffer = b""


class Fleet:
    """One `mail-client fleet` process running many devices; its lines name their device."""

    def __init__(self, proc):
        self.proc = proc
        self.by_name = {}
        self.buffer = b""


SYSTEM_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"


def can_trust_in_namespace():
    """Whether a process can be given the dev CA in its system store: root, unshare and the system bundle."""
    return os.geteuid() == 0 and shutil.which("unshare") is not None and os.path.exists(SYSTEM_CA_BUNDLE)


def urlsession_trust(cluster):
    """The command prefix that runs a process in a mount namespace of its own where the system CA bundle also holds
    the cluster's dev CA (a bind mount over the bundle, seen by that process only): how a `--transport urlsession`
    device trusts the dev CA, since FoundationNetworking takes no CA from code. The prefix execs, so the process
    keeps the pid it is started with."""
    bundle = os.path.join(cluster.work, "ca-certificates.crt")
    with open(SYSTEM_CA_BUNDLE) as system, open(cluster.ca) as ca, open(bundle, "w") as out:
        out.write(system.read() + "\n" + ca.read())
    return ["unshare", "--mount", "sh", "-c", f'mount --bind "$0" {SYSTEM_CA_BUNDLE} && exec "$@"', bundle]


class MailClients:
    """`mail-client run` processes (one per simulated device), or `mail-client fleet` processes (many devices
    each); one thread reads every event line. `on_sync(device, (time, modseq, messages))` and
    `on_event(device, event)` are called on that thread."""

    def __init__(self, cluster, fallback=0, on_sync=None, on_event=None):
        self.cluster = cluster
        self.fallback = fallback
        self.devices = []
        self.by_fd = {}
        self.selector = selectors.DefaultSelector()
        self.lock = threading.Lock()
        self.on_sync = on_sync
        self.on_event = on_event
        self.running = True
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()
        cluster.clients = self

    def push_flags(self, service, environment=None):
        c = self.cluster
        if service == "fcm":
            return ["--service", "fcm", "--sim", c.fcm_sim_url, "--app", TOPIC]
        if service == "webpush":
            return ["--service", "webpush", "--sim", c.webpush_sim_url]
        return ["--sim", c.sim_url, "--topic", TOPIC, *(["--environment", environment] if environment else [])]

    def add(self, name, user, service="apns", live=False, environment=None, imap_port=None, urlsession=False):
        """One device in its own `mail-client run`; `live` holds the server's event stream too; `imap_port` makes
        it fetch over IMAP (`--fetch imap`) after each signal, as a mail app does; `urlsession` makes it talk to the
        API through URLSession (`--transport urlsession`), which trusts the system store only: the dev CA is added
        to it in the device's own mount namespace (root only; see `urlsession_trust`)."""
        c = self.cluster
        device = Device(name, user)
        device.live, device.service, device.environment = live, service, environment
        device.imap, device.urlsession = imap_port is not None, urlsession
        fetch = ["--fetch", "imap", "--imap", f"localhost:{imap_port}"] if imap_port is not None else []
        device.state_dir = os.path.join(c.work, "devices", name)
        trust = ["--ca", c.ca]
        if urlsession:
            trust = ["--transport", "urlsession"]
        command = [
            c.exe("mail-client"), "run", "--server", c.api_url, *trust, *self.push_flags(service, environment),
            "--username", user, "--state-dir", device.state_dir, "--device-name", name, "--fallback-interval",
            str(self.fallback), *(["--live"] if live else []), *fetch]
        if urlsession:
            command = urlsession_trust(c) + command
        device.proc = Proc(f"client-{name}", command, c.work, stdin_text=f"password-{user}\n", stdout_pipe=True)
        self._watch(device.proc, device, [device])
        return device

    def add_fleet(self, pairs, start_concurrency=16, live=False):
        """Devices [(name, user)] in one `mail-client fleet` process."""
        c = self.cluster
        lines = "".join(f"{name} {user} password-{user}\n" for name, user in pairs)
        proc = Proc(f"fleet-{pairs[0][0]}", [
            c.exe("mail-client"), "fleet", "--server", c.api_url, "--ca", c.ca, "--sim", c.sim_url, "--state-dir",
            os.path.join(c.work, "fleet"), "--topic", TOPIC, "--fallback-interval", str(self.fallback),
            "--start-concurrency", str(start_concurrency), *(["--live"] if live else [])], c.work,
            stdin_text=lines, stdout_pipe=True)
        fleet = Fleet(proc)
        devices = []
        for name, user in pairs:
            device = Device(name, user)
            device.proc, device.live = proc, live
            fleet.by_name[name] = device
            devices.append(device)
        self._watch(proc, fleet, devices)
        return fleet

    def _watch(self, proc, reader, devices):
        os.set_blocking(proc.popen.stdout.fileno(), False)
        with self.lock:
            self.devices.extend(devices)
            self.by_fd[proc.popen.stdout.fileno()] = reader
            self.selector.register(proc.popen.stdout, selectors.EVENT_READ, reader)

    def _read(self):
        while self.running:
            with self.lock:
                empty = not self.by_fd
            if empty:
                time.sleep(0.05)
                continue
            for key, _ in self.selector.select(timeout=0.1):
                self._read_ready(key)

    def _read_ready(self, key):
        reader = key.data
        now = time.monotonic()
        try:
            chunk = os.read(key.fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            with self.lock:
                self.selector.unregister(key.fileobj)
                self.by_fd.pop(key.fd, None)
            return
        reader.buffer += chunk
        *lines, reader.buffer = reader.buffer.split(b"\n")
        for line in lines:
            if isinstance(reader, Fleet):
                match = re.search(rb'"device":"([^"]+)"', line)
                target = reader.by_name.get(match.group(1).decode()) if match else None
                if target:
                    self._event(target, line, now)
            else:
                self._event(reader, line, now)

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
        elif kind == "badge":
            device.badge = event.get("badge")
        elif kind == "stream" and event.get("source") == "server":
            device.server_streams += 1
        elif kind == "error":
            device.errors.append(event.get("code"))
        if self.on_event:
            self.on_event(device, event)

    def wait_ready(self, timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if all(d.token and d.last_sync for d in self.devices):
                return True
            dead = [d for d in self.devices if d.proc.poll() is not None]
            if dead:
                raise RuntimeError(f"mail-client {dead[0].name} exited ({describe_exit(dead[0].proc.returncode)}): "
                                   f"{dead[0].proc.stderr_tail()}")
            time.sleep(0.1)
        missing = [d.name for d in self.devices if not (d.token and d.last_sync)]
        raise RuntimeError(f"{len(missing)} devices never registered and synced, e.g. {missing[:3]}")

    def wait_following(self, timeout=60):
        """Waits until every live device holds the server's event stream."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if all(d.server_streams for d in self.devices if d.live):
                return
            time.sleep(0.05)
        missing = [d.name for d in self.devices if d.live and not d.server_streams]
        raise RuntimeError(f"{len(missing)} live devices never opened the server's event stream, e.g. {missing[:3]}")

    def stop(self):
        self.running = False
        for device in self.devices:
            device.proc.stop(signal.SIGKILL)


def start_devices(cluster, users, per_account=2, fallback=0, service="apns", timeout=300, letter="d",
                  urlsession=lambda name: False):
    """`per_account` devices per account (`USER-dN`), each its own mail-client, registered and synced; those whose
    name `urlsession` picks talk to the API through URLSession, the others through libcurl.

    The URLSession devices start once the others are ready, two at a time: FoundationNetworking on Linux keeps a
    write source armed on a connection it has just opened until its first response arrives (see docs/apps.md), so
    a device waiting for a sign-in behind a hundred others' takes a core for as long as it waits."""
    clients = MailClients(cluster, fallback=fallback)
    later = []
    for user in users:
        for n in range(per_account):
            name = f"{user}-{letter}{n}"
            if urlsession(name):
                later.append((name, user))
            else:
                clients.add(name, user, service=service)
    clients.wait_ready(timeout=timeout)
    for first in range(0, len(later), 2):
        for name, user in later[first:first + 2]:
            clients.add(name, user, service=service, urlsession=True)
        clients.wait_ready(timeout=timeout)
    return clients


# MARK: - Mail and convergence

def deliver_body(i, size=600):
    words = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor".split()
    rng = random.Random(i)
    return " ".join(rng.choice(words) for _ in range(size // 6))[:size]


def deliver(api, cluster, to, i, sender="sender", subject="Message", size=600):
    """One delivery; returns (user, modseq, t201)."""
    status, receipt = api.call("POST", "/v1/deliveries", token=cluster.delivery_token, body={
        "to": to, "from": f"{sender}{i}@example.com", "subject": f"{subject} {i}", "body": deliver_body(i, size)})
    if status != 201:
        raise RuntimeError(f"delivery {i}: HTTP {status} {receipt}")
    return to, modseq(receipt["state"]), time.monotonic()


def deliver_poisson(api, cluster, users, deliveries, rate, seed):
    """Deliveries at `rate` per second (Poisson arrivals) to random users; [(user, modseq, t201)]."""
    rng = random.Random(seed)
    sent = []
    next_at = time.monotonic()
    for i in range(deliveries):
        next_at += rng.expovariate(rate)
        delay = next_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        sent.append(deliver(api, cluster, rng.choice(users), i))
    return sent


def server_states(cluster, users):
    """{user: (modseq, message count, message ids, token)} read from the server."""
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


def converge(cluster, clients, users, timeout, label):
    """wait_converged, raising when the devices do not converge."""
    ok, detail = wait_converged(cluster, clients, users, timeout)
    if not ok:
        raise RuntimeError(f"{label}: {detail}")
    return detail


# MARK: - The console

class ConsoleReader:
    """An open console: signs in with the console token and reads /console/events on a thread, noting for each
    event how long after its `at` (the store's clock, the same machine's) it arrived; without `timing` it only
    counts events, reading in large chunks (as lightly as a browser elsewhere would)."""

    def __init__(self, cluster, timing=True, timeout=120):
        self.timing = timing
        context = ssl.create_default_context(cafile=cluster.ca)
        cookie = self._sign_in(cluster, context)
        self.stream = http.client.HTTPSConnection("127.0.0.1", cluster.api_port, context=context, timeout=timeout)
        self.stream.request("GET", "/console/events?after=0", headers={"Cookie": cookie})
        self.response = self.stream.getresponse()
        if self.response.status != 200:
            raise RuntimeError(f"console: events answered {self.response.status}")
        self.lags = {"change": [], "signal": [], "fetch": []}
        self.events = 0
        self.running = True
        threading.Thread(target=self._read, daemon=True).start()

    @staticmethod
    def _sign_in(cluster, context):
        token = cluster.read("console-token")
        conn = http.client.HTTPSConnection("127.0.0.1", cluster.api_port, context=context, timeout=30)
        conn.request("POST", "/console/session", body=urllib.parse.urlencode({"token": token}),
                     headers={"Content-Type": "application/x-www-form-urlencoded"})
        answer = conn.getresponse()
        answer.read()
        if answer.status != 303:
            raise RuntimeError(f"console: sign-in answered {answer.status}")
        return answer.getheader("Set-Cookie").split(";")[0]

    def _read(self):
        try:
            self._count() if not self.timing else self._time()
        except (OSError, ValueError, AttributeError):  # AttributeError: the connection was closed under readline
            return

    def _count(self):
        raw = self.response.fp
        while self.running:
            chunk = raw.read1(65536)
            if not chunk:
                return
            self.events += chunk.count(b"\nid: ")

    def _time(self):
        kind = None
        while self.running:
            line = self.response.readline()
            if not line:
                return
            line = line.decode().rstrip("\n")
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: ") and kind in self.lags:
                event = json.loads(line[6:])
                self.lags[kind].append(time.time() * 1000 - event["at"])
                self.events += 1

    def close(self):
        self.running = False
        self.stream.close()
