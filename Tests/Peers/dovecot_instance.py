"""A throwaway Dovecot 2.3 (Debian's dovecot-imapd + dovecot-lmtpd) on loopback, entirely inside one directory: the
reference IMAP server that the IMAP client peers (imap_imaplib.py, imap_mbsync.py) run against beside mailboxd.

Usage (as root; Dovecot's master must start as root and drops to its own users):
  dovecot_instance.py start DIR --cert PEM --key PEM --user NAME --password PW [--mail-user signalfetch-mail]
                               [--max-message-bytes 26214400]
      Writes DIR/etc/dovecot.conf and DIR/etc/passwd (one user, a {PLAIN} password), Maildir under DIR/mail/NAME,
      base_dir DIR/run, state_dir DIR/state, log DIR/dovecot.log, and starts `dovecot -F -c DIR/etc/dovecot.conf`
      in its own session (pid in DIR/pid). IMAP with implicit TLS (imaps, the given certificate and key) and LMTP
      (plain) on 127.0.0.1; INBOX, Archive (\\Archive) and Trash (\\Trash), both auto=subscribe; login processes
      in high-performance mode (service_count = 0); mail_max_userip_connections 10000; the largest message
      --max-message-bytes (default 25 MiB, mailboxd's default) through the quota plugin's quota_max_mail_size and
      no storage quota, so that an APPEND announcing a larger literal is refused before its continuation, as
      mailboxd refuses it. Mail is owned by a
      dedicated system user (default signalfetch-mail, created with useradd --system if missing). User names are
      taken with or without a domain (auth_username_format = %Ln): LOGIN alice@example.com is alice, and LMTP
      takes RCPT TO:<alice@example.com> or <alice>; any other recipient is refused (550 5.1.1).
      Ports: each attempt takes two free ports from the kernel (bind to port 0, close), writes them into the
      configuration and starts Dovecot; it then reads back from /proc which TCP ports the master's own sockets
      listen on, and uses those. If Dovecot could not bind (another process took a port in between), it exits
      and the next attempt takes new ports (5 attempts). Ready means: an imaps connection completes the TLS
      handshake and reads "* OK", and an LMTP connection reads "220". Prints one JSON line:
      {"imap": PORT, "lmtp": PORT, "pid": PID}. Exits non-zero (the log's tail on stderr) when it cannot start.
  dovecot_instance.py stop DIR
      SIGTERM to the recorded master pid (only if that process still runs this DIR's configuration), waits up to
      10 s for it and its children to go, then SIGKILL to its process group. Prints {"stopped": PID} or
      {"stopped": null} when nothing was running.
  dovecot_instance.py log DIR
      Prints DIR/dovecot.log.
"""
import argparse
import json
import os
import pwd
import grp
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time

DOVECOT = "/usr/sbin/dovecot"
ATTEMPTS = 5


def die(message):
    print(f"dovecot_instance: {message}", file=sys.stderr)
    sys.exit(1)


def paths(directory):
    directory = os.path.realpath(directory)
    return {
        "dir": directory, "etc": os.path.join(directory, "etc"), "conf": os.path.join(directory, "etc", "dovecot.conf"),
        "passwd": os.path.join(directory, "etc", "passwd"), "run": os.path.join(directory, "run"),
        "state": os.path.join(directory, "state"), "mail": os.path.join(directory, "mail"),
        "log": os.path.join(directory, "dovecot.log"), "pid": os.path.join(directory, "pid"),
    }


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ensure_mail_user(name):
    try:
        return pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
                        "--shell", "/usr/sbin/nologin", name], check=True)
        return pwd.getpwnam(name)


def our_master(p):
    """The recorded master pid, if that process is alive and runs this directory's configuration."""
    try:
        pid = int(open(p["pid"]).read().strip())
        cmdline = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
    except (OSError, ValueError):
        return None
    return pid if p["conf"].encode() in cmdline else None


def listening_ports(pid):
    """The loopback TCP ports on which the sockets held by process `pid` listen (from /proc, like ss -ltnp)."""
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except OSError:
        return set()
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A = LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def config(p, imap_port, lmtp_port, cert, key, mail_user, max_message_bytes):
    dh = "ssl_dh = </usr/share/dovecot/dh.pem" if os.path.exists("/usr/share/dovecot/dh.pem") else ""
    return f"""# Generated by Tests/Peers/dovecot_instance.py: a throwaway test instance. Do not edit; rerun "start".
instance_name = signalfetch-{os.path.basename(p['dir'])}
base_dir = {p['run']}
state_dir = {p['state']}
log_path = {p['log']}
protocols = imap lmtp
listen = 127.0.0.1
hostname = dovecot.test
postmaster_address = postmaster@example.com

ssl = required
ssl_cert = <{cert}
ssl_key = <{key}
{dh}
disable_plaintext_auth = yes
auth_mechanisms = plain login
auth_username_format = %Ln
auth_verbose = yes
passdb {{
  driver = passwd-file
  args = scheme=PLAIN {p['passwd']}
}}
userdb {{
  driver = passwd-file
  args = {p['passwd']}
}}
first_valid_uid = {mail_user.pw_uid}
last_valid_uid = {mail_user.pw_uid}
first_valid_gid = {mail_user.pw_gid}
last_valid_gid = {mail_user.pw_gid}
mail_location = maildir:~/Maildir
# The largest message, as mailboxd's --max-message-bytes: the quota plugin with no storage limit, only a size limit,
# which also refuses an APPEND whose literal announces more, before the continuation.
mail_plugins = $mail_plugins quota
plugin {{
  quota = count:User quota
  quota_vsizes = yes
  quota_max_mail_size = {max_message_bytes}
}}

namespace inbox {{
  inbox = yes
  separator = /
  mailbox Archive {{
    special_use = \\Archive
    auto = subscribe
  }}
  mailbox Trash {{
    special_use = \\Trash
    auto = subscribe
  }}
}}

protocol imap {{
  mail_max_userip_connections = 10000
}}

# High-performance login: a few long-lived imap-login processes, each holding many TLS connections (the default,
# one process per connection, is capped at 100).
service imap-login {{
  inet_listener imap {{
    port = 0
  }}
  inet_listener imaps {{
    address = 127.0.0.1
    port = {imap_port}
    ssl = yes
  }}
  service_count = 0
  client_limit = 4000
  process_min_avail = 2
  vsz_limit = 1G
}}
service imap {{
  process_limit = 4000
}}
service lmtp {{
  inet_listener lmtp {{
    address = 127.0.0.1
    port = {lmtp_port}
  }}
}}
service auth {{
  client_limit = 10000
}}
service anvil {{
  client_limit = 10000
}}
# Every imap process connects to stats-writer; at the default client_limit (1000) the thousand-and-first waits for
# a handshake that never comes (an error after 5 s), stalling its IDLE.
service stats {{
  client_limit = 10000
}}
"""


def log_tail(p, lines=30):
    try:
        return "\n".join(open(p["log"], errors="replace").read().splitlines()[-lines:])
    except OSError:
        return "(no log)"


def imap_ready(port, cert):
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            with context.wrap_socket(raw) as s:
                return s.recv(4096).startswith(b"* OK")
    except OSError:
        return False


def lmtp_ready(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            greeting = s.recv(4096)
            s.sendall(b"QUIT\r\n")
            return greeting.startswith(b"220")
    except OSError:
        return False


def start(args):
    if os.geteuid() != 0:
        die("must run as root (Dovecot's master starts as root and drops to its users)")
    if not os.access(DOVECOT, os.X_OK):
        die("dovecot is not installed: apt-get install dovecot-imapd dovecot-lmtpd")
    for name in ("dovecot", "dovenull"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            die(f"user {name} missing: install dovecot-core")
    os.makedirs(args.dir, exist_ok=True)
    p = paths(args.dir)
    if our_master(p):
        die(f"an instance is already running in {p['dir']} (pid {our_master(p)})")
    if len(p["run"]) > 70:
        die(f"instance path too long for Unix sockets under {p['run']}")
    for f in (args.cert, args.key):
        if not os.path.isfile(f):
            die(f"no such file: {f}")
    if ":" in args.password or "\n" in args.password or ":" in args.user or "/" in args.user:
        die("user and password may not contain ':' (nor the user '/') in a passwd-file")
    mail_user = ensure_mail_user(args.mail_user)
    dovecot_gid = grp.getgrnam("dovecot").gr_gid

    for d in (p["etc"], p["run"], p["state"]):
        os.makedirs(d, exist_ok=True)
    os.makedirs(p["mail"], exist_ok=True)
    home = os.path.join(p["mail"], args.user.lower())
    os.makedirs(home, exist_ok=True)
    # The mail user and the auth process (user dovecot) must reach into DIR (mktemp -d makes it 0700).
    os.chmod(p["dir"], 0o755)
    os.chmod(p["etc"], 0o755)
    os.chmod(p["mail"], 0o755)
    os.chown(home, mail_user.pw_uid, mail_user.pw_gid)
    os.chmod(home, 0o700)
    with open(p["passwd"], "w") as f:
        f.write(f"{args.user.lower()}:{{PLAIN}}{args.password}:{mail_user.pw_uid}:{mail_user.pw_gid}::{home}::\n")
    os.chown(p["passwd"], 0, dovecot_gid)
    os.chmod(p["passwd"], 0o640)
    cert, key = os.path.realpath(args.cert), os.path.realpath(args.key)

    for attempt in range(1, ATTEMPTS + 1):
        imap_port = free_port()
        lmtp_port = free_port()
        while lmtp_port == imap_port:
            lmtp_port = free_port()
        with open(p["conf"], "w") as f:
            f.write(config(p, imap_port, lmtp_port, cert, key, mail_user, args.max_message_bytes))
        log = open(p["log"], "ab")
        process = subprocess.Popen([DOVECOT, "-F", "-c", p["conf"]], stdin=subprocess.DEVNULL, stdout=log,
                                   stderr=log, start_new_session=True, close_fds=True)
        log.close()
        with open(p["pid"], "w") as f:
            f.write(f"{process.pid}\n")
        deadline = time.monotonic() + 30
        bound = set()
        while time.monotonic() < deadline and process.poll() is None:
            bound = listening_ports(process.pid)
            if {imap_port, lmtp_port} <= bound:
                break
            time.sleep(0.05)
        if process.poll() is not None:
            os.unlink(p["pid"])
            if "Address already in use" in log_tail(p, 10) and attempt < ATTEMPTS:
                continue
            die(f"dovecot exited with status {process.returncode}:\n{log_tail(p)}")
        if not {imap_port, lmtp_port} <= bound:
            stop_pid(process.pid)
            die(f"dovecot did not listen on {imap_port} and {lmtp_port} (listening: {sorted(bound)}):\n{log_tail(p)}")
        # Listening is the master's doing; ready is a login process greeting over TLS and LMTP answering.
        while time.monotonic() < deadline and process.poll() is None:
            if imap_ready(imap_port, cert) and lmtp_ready(lmtp_port):
                print(json.dumps({"imap": imap_port, "lmtp": lmtp_port, "pid": process.pid}), flush=True)
                return
            time.sleep(0.1)
        stop_pid(process.pid)
        die(f"dovecot did not become ready:\n{log_tail(p)}")
    die("no free ports after several attempts")


def stop_pid(pid):
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            # Reap it if it is our child (start's failure paths); otherwise just look whether it still exists.
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                break
        except ChildProcessError:
            pass
        if not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split(") ")[1][0] == "Z":
            break
        time.sleep(0.05)
    else:
        try:
            os.killpg(pid, signal.SIGKILL)  # started with start_new_session: the group is the master's pid
        except ProcessLookupError:
            pass
    # The children notice the master's death through their status pipe; give them a moment, then make sure.
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def stop(args):
    p = paths(args.dir)
    pid = our_master(p)
    if pid:
        stop_pid(pid)
    try:
        os.unlink(p["pid"])
    except FileNotFoundError:
        pass
    print(json.dumps({"stopped": pid}), flush=True)


def main():
    parser = argparse.ArgumentParser(description="A throwaway Dovecot 2.3 for tests.")
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("start")
    s.add_argument("dir")
    s.add_argument("--cert", required=True)
    s.add_argument("--key", required=True)
    s.add_argument("--user", required=True)
    s.add_argument("--password", required=True)
    s.add_argument("--mail-user", default="signalfetch-mail")
    s.add_argument("--max-message-bytes", type=int, default=26214400)
    t = sub.add_parser("stop")
    t.add_argument("dir")
    l = sub.add_parser("log")
    l.add_argument("dir")
    args = parser.parse_args()
    if args.command == "start":
        start(args)
    elif args.command == "stop":
        stop(args)
    else:
        shutil.copyfileobj(open(paths(args.dir)["log"], "rb"), sys.stdout.buffer)


if __name__ == "__main__":
    main()
