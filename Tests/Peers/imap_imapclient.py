"""imapclient (PyPI), a high-level IMAP client, against an IMAP server over TLS: CONDSTORE and QRESYNC as a syncing
client uses them (HIGHESTMODSEQ on SELECT, FETCH MODSEQ, FETCH CHANGEDSINCE, SEARCH MODSEQ, STORE UNCHANGEDSINCE,
UID FETCH with CHANGEDSINCE and VANISHED after an expunge), its IDLE helpers hearing a delivery, folder_status,
append, copy and move. Server-neutral: the same script runs against mailboxd and against Dovecot
(Tests/Peers/dovecot_instance.py), each freshly started with an empty INBOX for USER.

Usage: imap_imapclient.py IMAP_PORT CA_FILE USER PASSWORD LMTP_PORT
  Connects to 127.0.0.1:IMAP_PORT with implicit TLS (the server verified against CA_FILE) and delivers over LMTP to
  127.0.0.1:LMTP_PORT, recipient USER@example.com.

Output: one JSON object: highestModseq (after SELECT), modseqs (FETCH MODSEQ of each UID), changedSince (the UIDs a
FETCH CHANGEDSINCE returned after one flag change), searchModseq (SEARCH MODSEQ's UIDs), conditionalStore (what
STORE UNCHANGEDSINCE with a stale modseq left modified), vanished (the UIDs UID FETCH (CHANGEDSINCE VANISHED)
reported gone after an expunge), idleResponses (what idle_check heard of a delivery), status (folder_status of
Archive), appendUID, moved, and failures (the checks that failed, each named; exit 1 when any).
"""
import json
import ssl
import sys

import imapclient
import lmtp_deliver

port, ca, user, password, lmtp_port = sys.argv[1:6]
results = {}
failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
    return bool(condition)


def deliver(subject):
    code, _ = lmtp_deliver.deliver("127.0.0.1", lmtp_port, user, subject)
    check(code == 250, f"LMTP delivery of {subject!r}")


def connect():
    context = ssl.create_default_context(cafile=ca)
    client = imapclient.IMAPClient("127.0.0.1", port=int(port), ssl=True, ssl_context=context, timeout=30)
    client.login(user, password)
    return client


def run():
    for subject in ["one", "two", "three"]:
        deliver(subject)
    c = connect()
    check(c.has_capability("CONDSTORE") and c.has_capability("QRESYNC"), "CONDSTORE and QRESYNC after login")
    enabled = c.enable("QRESYNC")
    check(b"QRESYNC" in [e.upper() for e in enabled], "ENABLE QRESYNC")
    selected = c.select_folder("INBOX")
    highest = int(selected.get(b"HIGHESTMODSEQ", 0))
    results["highestModseq"] = highest
    check(highest > 0 and selected.get(b"EXISTS") == 3, "SELECT: 3 EXISTS and a HIGHESTMODSEQ")

    fetched = c.fetch(c.search("ALL"), ["UID", "FLAGS", "MODSEQ"])
    modseqs = {uid: data[b"MODSEQ"][0] for uid, data in fetched.items()}
    results["modseqs"] = {str(uid): m for uid, m in modseqs.items()}
    uids = sorted(modseqs)
    check(len(uids) == 3 and all(0 < m <= highest for m in modseqs.values()), "FETCH MODSEQ: each at most HIGHESTMODSEQ")

    # One flag change: only that message is newer than the HIGHESTMODSEQ of the SELECT.
    changed = c.add_flags([uids[1]], [imapclient.FLAGGED])
    check(uids[1] in changed, "STORE +FLAGS answers the message")
    since = c.fetch(uids, ["FLAGS"], modifiers=[f"CHANGEDSINCE {highest}"])
    results["changedSince"] = sorted(since)
    check(sorted(since) == [uids[1]], "FETCH CHANGEDSINCE: only the flagged message")
    found = c.search(["MODSEQ", str(highest + 1)])
    results["searchModseq"] = sorted(found)
    check(sorted(found) == [uids[1]], "SEARCH MODSEQ: only the flagged message")
    newer = c.fetch([uids[1]], ["MODSEQ"])[uids[1]][b"MODSEQ"][0]
    check(newer > highest, "the flagged message's MODSEQ rose above the old HIGHESTMODSEQ")

    # STORE UNCHANGEDSINCE with the old modseq: the message changed since, so it is left as it is and named MODIFIED.
    tag = c._imap._command("UID", "STORE", str(uids[1]), f"(UNCHANGEDSINCE {highest})", "+FLAGS", "(\\Seen)")
    typ, data = c._imap._command_complete("UID", tag)
    text = b" ".join(d for d in data if isinstance(d, bytes)).decode(errors="replace")
    results["conditionalStore"] = text
    check(typ == "OK" and "MODIFIED" in text, "STORE UNCHANGEDSINCE a stale modseq: OK [MODIFIED ...]")
    flags = c.get_flags([uids[1]])[uids[1]]
    check(imapclient.SEEN not in flags, "the conditional STORE left \\Seen unset")

    # IDLE: imapclient's helpers hear a delivery as EXISTS.
    c.idle()
    deliver("four")
    heard = []
    for _ in range(10):
        heard += c.idle_check(timeout=30)
        if any(isinstance(r, tuple) and len(r) >= 2 and r[1] == b"EXISTS" for r in heard):
            break
    c.idle_done()
    results["idleResponses"] = [[x.decode() if isinstance(x, bytes) else x for x in r] for r in heard]
    check(any(r[1] == b"EXISTS" and r[0] == 4 for r in heard if isinstance(r, tuple) and len(r) >= 2),
          "idle_check: 4 EXISTS")

    # Expunge one, then ask what vanished since the old HIGHESTMODSEQ (RFC 7162 section 3.2.6).
    before = c.select_folder("INBOX")
    modseq_before = int(before[b"HIGHESTMODSEQ"])
    c.add_flags([uids[0]], [imapclient.DELETED])
    c.uid_expunge([uids[0]]) if c.has_capability("UIDPLUS") else c.expunge()
    tag = c._imap._command("UID", "FETCH", "1:*", "(FLAGS)", f"(CHANGEDSINCE {modseq_before} VANISHED)")
    typ, _ = c._imap._command_complete("FETCH", tag)
    vanished = set()
    for line in c._imap.untagged_responses.pop("VANISHED", []):
        text = line.decode()
        if text.upper().startswith("(EARLIER)"):
            for part in text.split(")", 1)[1].strip().split(","):
                low, _, high = part.partition(":")
                vanished.update(range(int(low), int(high or low) + 1))
    results["vanished"] = sorted(vanished)
    check(typ == "OK" and uids[0] in vanished, "UID FETCH (CHANGEDSINCE VANISHED): the expunged UID")

    # Filing: APPEND (APPENDUID), COPY (COPYUID), MOVE, folder_status.
    appended = c.append("Archive", b"From: a@example.com\r\nSubject: appended\r\n\r\nfiled\r\n", flags=[imapclient.SEEN])
    results["appendUID"] = appended.decode(errors="replace") if isinstance(appended, bytes) else str(appended)
    check("APPENDUID" in results["appendUID"], "append: APPENDUID")
    # imapclient's copy() returns what imaplib's uid() keeps, not the tagged OK with COPYUID (imap_imaplib.py checks
    # that at the wire level): here the copy is seen in folder_status.
    c.copy([uids[2]], "Archive")
    moved = c.move([uids[1]], "Archive")
    results["moved"] = moved.decode(errors="replace") if isinstance(moved, bytes) else str(moved)
    status = c.folder_status("Archive", ["MESSAGES", "UNSEEN", "UIDNEXT", "UIDVALIDITY", "HIGHESTMODSEQ"])
    results["status"] = {k.decode(): v for k, v in status.items()}
    check(status.get(b"MESSAGES") == 3, "folder_status Archive: appended, copied, moved")
    check(status.get(b"UNSEEN") == 2, "folder_status Archive: the appended one seen, the other two not")
    inbox = c.folder_status("INBOX", ["MESSAGES"])
    check(inbox.get(b"MESSAGES") == 2, "INBOX keeps the copied message and the one delivered during IDLE")
    c.logout()


try:
    run()
except Exception as error:  # the results so far, and what broke (and where), still go out as JSON
    failures.append(f"exception: {error!r} at line {error.__traceback__.tb_next.tb_lineno if error.__traceback__.tb_next else '?'}")
results["failures"] = failures
print(json.dumps(results, default=str))
sys.exit(1 if failures else 0)
