"""mbsync (isync 1.4) against an IMAP server over implicit TLS, synchronizing INBOX and Archive with a local Maildir
both ways: a delivered message comes down, flags set in the Maildir go up, and a later delivery comes down too.
Server-neutral: runs against mailboxd and against Dovecot (Tests/Peers/dovecot_instance.py) alike.

Usage: imap_mbsync.py HOST PORT CA USER PASSWORD LMTP_PORT WORKDIR
  HOST     the server's name as its certificate has it, normally `localhost`: mbsync 1.4 checks the certificate's
           DNS names only, so 127.0.0.1 fails with "certificate owner does not match hostname" even when the
           certificate has that IP address
  PORT     the IMAPS port; CA: the CA file that signed the server's certificate (mbsync's CertificateFile)
  LMTP_PORT  deliveries go over LMTP to HOST:LMTP_PORT, recipient USER@example.com
  WORKDIR  created if missing: WORKDIR/mbsyncrc (the configuration), WORKDIR/mail/ (the Maildir store: INBOX,
           Archive), WORKDIR/mbsync-<step>.log (each run's output with -V -Dn: the IMAP wire, protocol only)

The channel: Far = the IMAP store, Near = the Maildir, Patterns INBOX Archive, Sync All (new messages, flags and
deletions, both ways), Create Near (mailboxd cannot CREATE, so nothing is created on the server), Expunge None,
SyncState * (state kept in each Maildir folder).

Steps: deliver message A; mbsync -a; A must be in the Maildir's INBOX. Rename A's file into cur/ with the info
suffix ":2,FS" (flagged + seen); mbsync -a; over IMAP (imaplib, EXAMINE, so nothing changes), A must have \\Flagged
and \\Seen on the server. Deliver message B; mbsync -a; B must be in the Maildir and A still ":2,FS". Messages are
recognised by their Message-ID, so a server that already holds mail is fine. Last, a message written into the
Maildir's Archive (cur/, ":2,S"); mbsync -a; mbsync APPENDs it: the server's Archive must have it, \\Seen.

Output: one JSON object: firstArrived, flagsReachedServer, serverFlags (A's FLAGS on the server), secondArrived,
firstStillFlaggedLocally, archiveSynced (the Maildir has an Archive folder), filedReachedServer, filedFlags (its
FLAGS on the server), delivered (LMTP reply codes),
mbsyncOutput: per run {step, exitCode, log, commands (the client's IMAP commands, ">>> " lines; the password is
shown as mbsync shows it, <authdata>/<pass>), refusals (each tagged NO or BAD from the server, with the command it
answered), messages (mbsync's own errors and warnings)}, and failures (the checks that failed; exit 1 when any).
"""
import email
import imaplib
import json
import os
import re
import ssl
import subprocess
import sys
import time
import uuid

import lmtp_deliver

host, port, ca, user, password, lmtp_port, workdir = sys.argv[1:8]
workdir = os.path.abspath(workdir)
maildir = os.path.join(workdir, "mail")
config = os.path.join(workdir, "mbsyncrc")
results = {"delivered": [], "mbsyncOutput": []}
failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
    return bool(condition)


def quote(value):
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def deliver(subject):
    """Delivers one message over LMTP; returns its Message-ID."""
    code, message_id = lmtp_deliver.deliver(host, lmtp_port, user, subject)
    results["delivered"].append(code)
    check(code == 250, f"LMTP delivery of {subject!r}")
    return message_id


def mbsync(step):
    """Runs mbsync -a with the wire (protocol only) in WORKDIR/mbsync-STEP.log; returns the exit code."""
    log = os.path.join(workdir, f"mbsync-{step}.log")
    process = subprocess.run(["mbsync", "-V", "-Dn", "-c", config, "-a"], cwd=workdir, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    output = process.stdout.decode("utf-8", "replace")
    with open(log, "w") as f:
        f.write(output)
    lines = output.splitlines()
    commands, refusals, messages = {}, [], []
    for line in lines:
        sent = re.match(r"(?:\(\d+ in progress\) )?>>> (\d+) (.*)$", line)
        if sent:
            commands[sent.group(1)] = sent.group(2)
            continue
        answer = re.match(r"(\d+) (NO|BAD)\b(.*)$", line)
        if answer:
            refusals.append({"command": commands.get(answer.group(1), "?"), "answer": line})
            continue
        if re.search(r"\b(Error|Warning|error|warning)\b", line):
            messages.append(line)
    results["mbsyncOutput"].append({"step": step, "exitCode": process.returncode, "log": log,
                                    "commands": list(commands.values()), "refusals": refusals,
                                    "messages": messages})
    check(process.returncode == 0, f"mbsync ({step}) exit status 0, not {process.returncode} (see {log})")
    return process.returncode


def maildir_files(folder):
    """(path, Message-ID) of each message in a Maildir folder (new/ and cur/)."""
    found = []
    for sub in ("new", "cur"):
        directory = os.path.join(maildir, folder, sub)
        if not os.path.isdir(directory):
            continue
        for name in sorted(os.listdir(directory)):
            path = os.path.join(directory, name)
            with open(path, "rb") as f:
                headers = email.message_from_binary_file(f)
            found.append((path, (headers.get("Message-ID") or "").strip()))
    return found


def find(folder, message_id):
    return next((path for path, mid in maildir_files(folder) if mid == message_id), None)


def server_flags(message_id, folder="INBOX"):
    """The FLAGS the server has on the message with this Message-ID in FOLDER (EXAMINE: read-only), or None."""
    context = ssl.create_default_context(cafile=ca)
    m = imaplib.IMAP4_SSL(host, int(port), ssl_context=context, timeout=30)
    try:
        m.login(user, password)
        m.select(folder, readonly=True)
        typ, data = m.uid("SEARCH", None, f'HEADER Message-ID "{message_id}"')
        uids = data[0].split() if typ == "OK" and data and data[0] else []
        if not uids:
            return None
        typ, data = m.uid("FETCH", uids[0].decode(), "(FLAGS)")
        flags = re.search(rb"FLAGS \(([^)]*)\)", data[0] or b"")
        return flags.group(1).decode().split() if flags else []
    finally:
        m.logout()


def main():
    os.makedirs(maildir, exist_ok=True)
    with open(config, "w") as f:
        f.write(f"""# Written by Tests/Peers/imap_mbsync.py
IMAPAccount account
Host {host}
Port {port}
User {quote(user)}
Pass {quote(password)}
SSLType IMAPS
CertificateFile {quote(os.path.abspath(ca))}

IMAPStore far
Account account

MaildirStore near
Path {quote(maildir + "/")}
Inbox {quote(os.path.join(maildir, "INBOX"))}
SubFolders Verbatim

Channel mail
Far :far:
Near :near:
Patterns INBOX Archive
Create Near
Sync All
Expunge None
SyncState *
""")
    os.chmod(config, 0o600)

    first = deliver("mbsync first")
    mbsync("first")
    path = find("INBOX", first)
    results["firstArrived"] = check(path is not None, "the first message is in the Maildir's INBOX")
    results["archiveSynced"] = check(os.path.isdir(os.path.join(maildir, "Archive", "cur")),
                                     "the Maildir has Archive (Create Near)")
    if path is None:
        return

    # Flagged and seen in the Maildir: the info suffix ":2,FS", in cur/.
    base = os.path.basename(path).split(":2,")[0]
    flagged = os.path.join(maildir, "INBOX", "cur", base + ":2,FS")
    os.rename(path, flagged)
    mbsync("flags")
    flags = server_flags(first)
    results["serverFlags"] = flags
    results["flagsReachedServer"] = check(flags is not None and "\\Flagged" in flags and "\\Seen" in flags,
                                          "\\Flagged and \\Seen reached the server")

    second = deliver("mbsync second")
    mbsync("second")
    results["secondArrived"] = check(find("INBOX", second) is not None, "the second message is in the Maildir")
    first_now = find("INBOX", first)
    results["firstStillFlaggedLocally"] = check(first_now is not None and first_now.endswith(":2,FS"),
                                                "the first message is still :2,FS in the Maildir")

    # A message filed in the Maildir's Archive (cur/, seen): mbsync APPENDs it to the server's Archive.
    filed_id = f"<{uuid.uuid4().hex}@filed.mbsync.example.com>"
    filed = (f"From: Alice <{user}@example.com>\r\nTo: Carol <carol@example.com>\r\nSubject: filed locally\r\n"
             f"Date: {time.strftime('%a, %d %b %Y %H:%M:%S +0000', time.gmtime())}\r\nMessage-ID: {filed_id}\r\n"
             f"\r\nwritten into the Maildir\r\n")
    name = f"{time.time_ns()}.{os.getpid()}.filed:2,S"
    with open(os.path.join(maildir, "Archive", "cur", name), "w", newline="") as f:
        f.write(filed)
    mbsync("filed")
    flags = server_flags(filed_id, "Archive")
    results["filedFlags"] = flags
    results["filedReachedServer"] = check(flags is not None and "\\Seen" in flags,
                                          "a message filed in the Maildir's Archive reached the server's, \\Seen")


try:
    main()
except Exception as error:  # what was found so far still goes out
    failures.append(f"exception: {error!r}")
results["failures"] = failures
print(json.dumps(results))
sys.exit(1 if failures else 0)
