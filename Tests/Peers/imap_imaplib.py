"""Python's imaplib against an IMAP server over TLS, at the wire level: login, LIST with special-use, SELECT, FETCH,
a plain UID FETCH of every message, STORE, SEARCH, MOVE with COPYUID, CONDSTORE/QRESYNC, IDLE hearing a delivery,
CREATE/RENAME/DELETE of mailboxes (leaving one, Kept, with one message), \\Answered and keywords kept, and
refusals. Server-neutral: the same script runs against mailboxd and against Dovecot (Tests/Peers/
dovecot_instance.py), each freshly started with an empty INBOX for USER.

Usage: imap_imaplib.py IMAP_PORT CA_FILE USER PASSWORD LMTP_PORT
  Connects to imaps://127.0.0.1:IMAP_PORT (verifying the server against CA_FILE) and delivers over LMTP to
  127.0.0.1:LMTP_PORT, recipient USER@example.com: two messages ("first", "second") before selecting INBOX, and
  one ("while idling") during IDLE.

Output: one JSON object. The raw wire values are kept under their old keys (capabilities, wrongPassword, login,
list, exists, uidvalidity, uids, fetch, store, flagged, bogus, hugeLiteral, afterHuge, idleStart, delivered,
idleHeard, idleDone, move, status, enabled, qresyncSelect, vanished, highestmodseq, changedSince; `delivered` is
now the LMTP reply code to the delivery made while idling, 250, where it was the API's HTTP status), plus:
  capabilitiesAfterLogin  CAPABILITY after LOGIN (Dovecot, like many servers, announces CONDSTORE, QRESYNC, MOVE
                          and so on only after login; imaplib keeps the pre-login list in `capabilities`)
  deliveredBefore         the LMTP replies to the two deliveries made before SELECT (250 each)
  uidFetchAll             UID FETCH 1:* (UID FLAGS ENVELOPE BODYSTRUCTURE), parsed: responses (count), uids,
                          subjects (from ENVELOPE), complete (every response has all four items, ENVELOPE with its
                          ten fields and BODYSTRUCTURE a list), bodyTypes ("text/plain", ...)
  idleOther               the untagged lines heard between the EXISTS and the end of IDLE
  and the normalized values for what RFC-conforming servers may answer differently:
  wrongPasswordRefused    NO [AUTHENTICATIONFAILED] (the text after it differs)
  hugeLiteralRefused      a synchronizing APPEND literal of 2 GB refused at once with a tagged NO or BAD, no "+"
                          (mailboxd: NO [TOOBIG]; Dovecot with quota_max_mail_size: NO [LIMIT])
  idleHeardExists         the message count of the first EXISTS heard in IDLE (3); Dovecot also sends RECENT
  moveCopyUID             a COPYUID response code on MOVE (untagged OK, as both send it, or the tagged OK)
  vanishedIncludesMoved   the QRESYNC SELECT's VANISHED (EARLIER) names the UID moved away (mailboxd may name
                          UIDs that never existed, RFC 7162 allows that; Dovecot names only expunged ones)
  failures                the checks that failed, each named as in the check(...) calls below (2 EXISTS, the UIDs,
                          COPYUID, ...); empty when all passed. The JSON is printed either way (an exception is
                          recorded as a failure); the exit status is 1 when any failed.
Not checked here (server-specific): IMAP4rev2 (Dovecot 2.3 has only IMAP4rev1), the text after OK/NO/BAD, and
whether the server sends RECENT or HIGHESTMODSEQ unasked.
"""
import imaplib
import json
import re
import ssl
import sys
import time

import lmtp_deliver

port, ca, user, password, lmtp_port = sys.argv[1:6]
context = ssl.create_default_context(cafile=ca)
results = {}
failures = []


def check(condition, what):
    if not condition:
        failures.append(what)


def deliver(subject, body):
    """Delivers one message over LMTP; returns the reply code to DATA for the one recipient (250)."""
    return lmtp_deliver.deliver("127.0.0.1", lmtp_port, user, subject, body)[0]


def command(conn, line):
    """Sends `TAG line` and reads up to the tagged reply, with literals inline. Returns (untagged, tagged), both as
    raw bytes without the final CRLF of each response."""
    tag = conn._new_tag().decode()
    conn.send(f"{tag} {line}\r\n".encode())
    untagged = []
    while True:
        response = read_response(conn)
        if response.startswith(tag.encode() + b" "):
            return untagged, response
        untagged.append(response)


def read_response(conn):
    """One response line, with any literals it carries ({n}CRLF + n bytes) read into it."""
    data = b""
    while True:
        line = conn.readline()
        if not line:
            raise EOFError("connection closed")
        data += line
        literal = re.search(rb"\{(\d+)\+?\}\r\n$", line)
        if not literal:
            return data.rstrip(b"\r\n")
        data += conn.read(int(literal.group(1)))


def parse(data):
    """An IMAP value list (atoms, numbers as str, "quoted", literals, NIL as None, parenthesized lists) from bytes."""
    position = 0

    def value():
        nonlocal position
        while position < len(data) and data[position:position + 1] == b" ":
            position += 1
        c = data[position:position + 1]
        if c == b"(":
            position += 1
            items = []
            while True:
                while data[position:position + 1] == b" ":
                    position += 1
                if data[position:position + 1] == b")":
                    position += 1
                    return items
                items.append(value())
        if c == b'"':
            position += 1
            out = bytearray()
            while data[position:position + 1] != b'"':
                if data[position:position + 1] == b"\\":
                    position += 1
                out += data[position:position + 1]
                position += 1
            position += 1
            return out.decode("utf-8", "replace")
        if c == b"{":
            end = data.index(b"}", position)
            size = int(data[position + 1:end].rstrip(b"+"))
            start = end + 3  # "}\r\n"
            position = start + size
            return data[start:position].decode("utf-8", "replace")
        match = re.compile(rb"[^ ()\"{]+(\[[^\]]*\](<[0-9.]+>)?)?").match(data, position)
        position = match.end()
        atom = match.group(0).decode()
        return None if atom.upper() == "NIL" else atom

    items = []
    while position < len(data):
        if data[position:position + 1] == b" ":
            position += 1
            continue
        items.append(value())
    return items


def uid_set(text):
    uids = set()
    for part in text.split(","):
        if ":" in part:
            a, b = part.split(":")
            a, b = int(a), (int(b) if b != "*" else int(a))
            uids.update(range(min(a, b), max(a, b) + 1))
        elif part.strip():
            uids.add(int(part))
    return uids


def uid_search(m, *criteria):
    """UID SEARCH with these criteria: (tagged status, the UIDs found)."""
    typ, data = m.uid("SEARCH", None, *criteria)
    return typ, [int(x) for x in (data[0] or b"").split()] if typ == "OK" else []


def search_by_content(m):
    """SEARCH keys that read the messages (INBOX now holds "second", body "two", and "while idling", body "three",
    both from Carol): addresses, subject, header, body, text, dates and sizes, with NOT and OR."""
    typ, inbox = uid_search(m, "ALL")
    check(typ == "OK" and len(inbox) == 2, "UID SEARCH ALL after the move: 2 messages")
    second, idling = (inbox + [0, 0])[:2]
    cases = {
        "FROM carol": [second, idling],
        'FROM "Carol <carol@"': [second, idling],
        "SUBJECT IDLING": [idling],
        f"TO {user}@example.com": [second, idling],
        "BODY three": [idling],
        "NOT BODY three": [second],
        'TEXT "while idling"': [idling],
        "HEADER Message-ID second": [second],
        'HEADER X-Not-There ""': [],
        "OR SUBJECT second SUBJECT idling": [second, idling],
        "SINCE 1-Jan-2000": [second, idling],
        "BEFORE 1-Jan-2000": [],
        "SENTSINCE 1-Jan-2000 SENTBEFORE 1-Jan-2100": [second, idling],
        "LARGER 10000000": [],
        "SMALLER 100000 SUBJECT second": [second],
        "UNSEEN BODY two": [second],
    }
    results["searchByContent"] = {}
    for criteria, wanted in cases.items():
        typ, found = uid_search(m, criteria)
        results["searchByContent"][criteria] = found
        check(typ == "OK" and sorted(found) == sorted(wanted), f"UID SEARCH {criteria}")
    typ, data = m._simple_command("UID", "SEARCH", "RETURN", "(MIN MAX COUNT)", "FROM", "carol")
    esearch = [d.decode() for d in m.untagged_responses.pop("ESEARCH", [])]
    results["esearch"] = esearch
    check(typ == "OK" and any(f"MIN {second}" in e and f"MAX {idling}" in e and "COUNT 2" in e for e in esearch),
          "UID SEARCH RETURN (MIN MAX COUNT) FROM carol")
    try:
        typ, data = m._simple_command("SEARCH", "SINCE", "31-Foo-2026")
    except imaplib.IMAP4.error:  # imaplib raises on BAD
        typ = "BAD"
    results["badDate"] = typ
    check(typ == "BAD", "SEARCH with a malformed date is BAD")


def file_messages(m):
    """APPEND (with flags and a date) and COPY, answered with APPENDUID and COPYUID (UIDPLUS); a mailbox that does
    not exist is NO [TRYCREATE]."""
    message = (f"From: Dave <dave@example.com>\r\nTo: {user}@example.com\r\nSubject: filed by the client\r\n"
               f"Date: Sat, 05 Dec 2026 10:00:00 +0000\r\nMessage-ID: <{time.time_ns()}.filed@example.com>\r\n"
               f"MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nkept in the archive\r\n").encode()
    typ, data = m.append("Archive", "(\\Seen \\Flagged)", '"05-Dec-2026 10:00:01 +0100"', message)
    results["append"] = [d.decode() if isinstance(d, bytes) else str(d) for d in data]
    appenduid = re.search(r"APPENDUID (\d+) (\d+)", " ".join(results["append"]))
    check(typ == "OK" and appenduid is not None, "APPEND to Archive: OK [APPENDUID ...]")
    typ, data = m.status("Archive", "(MESSAGES UNSEEN)")
    results["statusAfterAppend"] = data[0].decode()
    check("MESSAGES 2" in results["statusAfterAppend"] and "UNSEEN 0" in results["statusAfterAppend"],
          "STATUS Archive after APPEND \\Seen: 2 messages, none unseen")
    typ, data = m.append("INBOX", None, None, message.replace(b"filed by the client", b"appended to the inbox"))
    check(typ == "OK", "APPEND to the selected INBOX")
    m.noop()
    typ, found = uid_search(m, "SUBJECT", '"appended to the inbox"')
    check(typ == "OK" and len(found) == 1, "SEARCH finds the message APPENDed to the selected mailbox")
    typ, inbox = uid_search(m, "SUBJECT", "second")
    # At the wire level: imaplib's uid() keeps the untagged FETCH responses, not the tagged OK that holds COPYUID.
    untagged, tagged = command(m, f"UID COPY {inbox[0] if inbox else 1} Archive")
    results["copy"] = [line.decode(errors="replace") for line in untagged + [tagged]]
    check(b" OK " in tagged and any("COPYUID" in line for line in results["copy"]), "UID COPY to Archive: OK [COPYUID ...]")
    typ, found = uid_search(m, "SUBJECT", "second")
    check(found == inbox, "UID COPY leaves the original in place")
    typ, data = m.status("Archive", "(MESSAGES)")
    check("MESSAGES 3" in data[0].decode(), "STATUS Archive after COPY: 3 messages")
    try:
        typ, data = m.append("No-Such-Box", None, None, message)
        results["appendNowhere"] = " ".join(d.decode() for d in data if d)
    except imaplib.IMAP4.error as error:
        results["appendNowhere"] = str(error)
    check("TRYCREATE" in results["appendNowhere"], "APPEND to a mailbox that does not exist: NO [TRYCREATE]")


def response_text(typ, data):
    return typ + " " + " ".join(d.decode(errors="replace") if isinstance(d, bytes) else str(d) for d in data if d)


def listed(m, pattern):
    """The names LIST "" PATTERN answers, unquoted."""
    typ, lines = m.list('""', pattern)
    names = []
    for line in lines or []:
        if not line:
            continue
        text = line.decode(errors="replace")
        match = re.match(r'\(.*?\) (?:"[^"]*"|NIL) (.*)$', text)
        if match:
            names.append(match.group(1).strip('"'))
    return sorted(names)


def manage_mailboxes(m):
    """CREATE (a hierarchy too), APPEND and COPY into the new mailbox, RENAME with what is below it, DELETE, and the
    refusals: a name taken, a mailbox that does not exist, INBOX. Leaves one made mailbox, Kept, holding one message,
    for the other doors to show. The hierarchy delimiter is "/" on both servers."""
    typ, data = m.create("Projects")
    check(typ == "OK", "CREATE Projects")
    results["createAgain"] = response_text(*m.create("Projects"))
    check(results["createAgain"].startswith("NO") and "ALREADYEXISTS" in results["createAgain"],
          "CREATE of a name taken: NO [ALREADYEXISTS]")
    typ, data = m.create("Projects/2026")
    check(typ == "OK", "CREATE Projects/2026")
    results["listProjects"] = listed(m, "Projects*")
    check(results["listProjects"] == ["Projects", "Projects/2026"], "LIST Projects*: the mailbox and its child")
    check(listed(m, "Projects/%") == ["Projects/2026"], "LIST Projects/%: the child only")
    message = (f"From: Erin <erin@example.com>\r\nTo: {user}@example.com\r\nSubject: in a made mailbox\r\n"
               f"Date: Sat, 05 Dec 2026 11:00:00 +0000\r\nMessage-ID: <{time.time_ns()}.made@example.com>\r\n"
               f"MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nfiled where it was made\r\n").encode()
    typ, data = m.append("Projects", "(\\Seen)", None, message)
    check(typ == "OK" and "APPENDUID" in response_text(typ, data), "APPEND to a made mailbox: OK [APPENDUID ...]")
    typ, inbox = uid_search(m, "SUBJECT", "second")
    check(len(inbox) == 1, "the second message is in INBOX")
    untagged, tagged = command(m, f"UID COPY {inbox[0] if inbox else 1} Projects")
    check(b" OK " in tagged, "UID COPY to a made mailbox")
    typ, data = m.rename("Projects", "Done")
    check(typ == "OK", "RENAME Projects Done")
    results["listAfterRename"] = listed(m, "*")
    check("Done" in results["listAfterRename"] and "Done/2026" in results["listAfterRename"]
          and not any(name.startswith("Projects") for name in results["listAfterRename"]),
          "RENAME takes the child along: Done and Done/2026, no Projects")
    typ, data = m.status("Done", "(MESSAGES UNSEEN)")
    results["statusDone"] = response_text(typ, data)
    check("MESSAGES 2" in results["statusDone"], "STATUS of the renamed mailbox: its 2 messages")
    typ, data = m.select("Done")
    check(typ == "OK" and int(data[0]) == 2, "SELECT the renamed mailbox: 2 EXISTS")
    m.select("INBOX")
    results["renameOnto"] = response_text(*m.rename("Done/2026", "Archive"))
    check(results["renameOnto"].startswith("NO"), "RENAME onto a name taken: NO")
    results["deleteMissing"] = response_text(*m.delete("No-Such-Box"))
    check(results["deleteMissing"].startswith("NO"), "DELETE of a mailbox that does not exist: NO")
    results["deleteInbox"] = response_text(*m.delete("INBOX"))
    check(results["deleteInbox"].startswith("NO"), "DELETE INBOX: NO")
    typ, data = m.delete("Done/2026")
    check(typ == "OK", "DELETE Done/2026")
    typ, data = m.delete("Done")
    check(typ == "OK", "DELETE Done, with its messages")
    results["listAfterDelete"] = listed(m, "*")
    check(not any(name.startswith("Done") for name in results["listAfterDelete"]), "LIST after DELETE: no Done")
    results["statusDeleted"] = response_text(*m.status("Done", "(MESSAGES)"))
    check(results["statusDeleted"].startswith("NO"), "STATUS of a deleted mailbox: NO")
    typ, data = m.create("Kept")
    typ, data = m.append("Kept", None, None, message.replace(b"in a made mailbox", b"kept in a made mailbox"))
    check(typ == "OK", "APPEND to Kept")


def keywords(m):
    """\\Answered and a keyword ($Forwarded) kept by STORE, shown by FETCH FLAGS, found by SEARCH ANSWERED and KEYWORD,
    removed by -FLAGS; PERMANENTFLAGS lets a client make keywords (\\*). Leaves the second message \\Answered."""
    m.select("INBOX")
    permanent = " ".join(d.decode() for d in m.untagged_responses.get("PERMANENTFLAGS", []) if d)
    results["permanentFlags"] = permanent
    check("\\*" in permanent and "\\ANSWERED" in permanent.upper(), "PERMANENTFLAGS: \\Answered and \\*")
    typ, found = uid_search(m, "SUBJECT", "second")
    uid = found[0] if found else 1
    typ, data = m.uid("STORE", str(uid), "+FLAGS", "(\\Answered $Forwarded)")
    check(typ == "OK", "UID STORE +FLAGS (\\Answered $Forwarded)")
    typ, data = m.uid("FETCH", str(uid), "(FLAGS)")
    results["keywordFlags"] = " ".join(d.decode() if isinstance(d, bytes) else str(d) for d in data if d)
    check("\\ANSWERED" in results["keywordFlags"].upper() and "$FORWARDED" in results["keywordFlags"].upper(),
          "FETCH FLAGS: \\Answered and $Forwarded kept")
    typ, answered = uid_search(m, "ANSWERED")
    check(answered == [uid], "UID SEARCH ANSWERED: the message answered")
    typ, forwarded = uid_search(m, "KEYWORD", "$Forwarded")
    check(forwarded == [uid], "UID SEARCH KEYWORD $Forwarded")
    typ, data = m.uid("STORE", str(uid), "-FLAGS", "($Forwarded)")
    typ, forwarded = uid_search(m, "KEYWORD", "$Forwarded")
    check(typ == "OK" and forwarded == [], "-FLAGS ($Forwarded): SEARCH KEYWORD finds none")


def run():
    results["deliveredBefore"] = [deliver("first", "one"), deliver("second", "two")]
    check(results["deliveredBefore"] == [250, 250], "two deliveries over LMTP before SELECT")

    m = imaplib.IMAP4_SSL("127.0.0.1", int(port), ssl_context=context, timeout=30)
    results["capabilities"] = list(m.capabilities)
    try:
        m.login(user, "not-the-password")
        results["wrongPassword"] = "OK"
    except imaplib.IMAP4.error as error:
        results["wrongPassword"] = str(error)
    results["wrongPasswordRefused"] = "AUTHENTICATIONFAILED" in results["wrongPassword"]
    check(results["wrongPasswordRefused"], "a wrong password is NO [AUTHENTICATIONFAILED]")
    typ, _ = m.login(user, password)
    results["login"] = typ
    check(typ == "OK", "LOGIN")
    typ, data = m.capability()
    results["capabilitiesAfterLogin"] = data[0].decode().upper().split()
    capabilities = set(results["capabilities"]) | set(results["capabilitiesAfterLogin"])
    for name in ["IMAP4REV1", "IDLE", "CONDSTORE", "QRESYNC", "UIDPLUS", "MOVE", "SPECIAL-USE", "ENABLE"]:
        check(name in capabilities, f"capability {name}")
    typ, lines = m.list()
    results["list"] = [line.decode() for line in lines]
    check(any("\\Archive" in line and "Archive" in line for line in results["list"]), "LIST: Archive with \\Archive")
    check(any("\\Trash" in line for line in results["list"]), "LIST: \\Trash")
    check(any(line.upper().endswith("INBOX") or line.upper().endswith('"INBOX"') for line in results["list"]),
          "LIST: INBOX")
    typ, data = m.select("INBOX")
    results["exists"] = int(data[0])
    check(results["exists"] == 2, "SELECT: 2 EXISTS")
    results["uidvalidity"] = int(m.untagged_responses.get("UIDVALIDITY", [b"0"])[0])
    check(results["uidvalidity"] > 0, "SELECT: UIDVALIDITY")
    typ, data = m.uid("SEARCH", None, "ALL")
    uids = [int(x) for x in data[0].split()]
    results["uids"] = uids
    check(len(uids) == 2 and uids == sorted(uids), "UID SEARCH ALL: 2 ascending UIDs")
    typ, data = m.fetch("1", "(UID FLAGS RFC822.SIZE ENVELOPE BODY.PEEK[])")
    results["fetch"] = [part.decode("utf-8", "replace") if isinstance(part, bytes) else
                        [p.decode("utf-8", "replace") for p in part] for part in data]
    fetched = json.dumps(results["fetch"])
    check("Subject: first" in fetched, "FETCH BODY.PEEK[]: the first message")
    check("ENVELOPE (" in fetched, "FETCH: an ENVELOPE")

    # A plain UID FETCH of every message: one response per message, each with the four items.
    untagged, tagged = command(m, "UID FETCH 1:* (UID FLAGS ENVELOPE BODYSTRUCTURE)")
    fetches = []
    for response in untagged:
        match = re.match(rb"\* (\d+) FETCH (.*)$", response, re.S)
        if match:
            items = parse(match.group(2))[0]
            fetches.append({str(items[i]).upper(): items[i + 1] for i in range(0, len(items) - 1, 2)})
    complete = bool(fetches) and all(
        set(f) >= {"UID", "FLAGS", "ENVELOPE", "BODYSTRUCTURE"} and isinstance(f["FLAGS"], list)
        and isinstance(f["ENVELOPE"], list) and len(f["ENVELOPE"]) == 10 and isinstance(f["BODYSTRUCTURE"], list)
        for f in fetches)


    def body_type(structure):
        if structure and isinstance(structure[0], list):
            return "multipart/" + str(next((x for x in structure if isinstance(x, str)), "")).lower()
        return f"{structure[0]}/{structure[1]}".lower() if len(structure) >= 2 else "?"


    results["uidFetchAll"] = {
        "tagged": tagged.decode(errors="replace").split(" ", 2)[1] if b" " in tagged else tagged.decode(),
        "responses": len(fetches),
        "uids": [int(f.get("UID", 0)) for f in fetches],
        "subjects": [f["ENVELOPE"][1] if isinstance(f.get("ENVELOPE"), list) else None for f in fetches],
        "complete": complete,
        "bodyTypes": [body_type(f["BODYSTRUCTURE"]) if isinstance(f.get("BODYSTRUCTURE"), list) else None
                      for f in fetches],
    }
    check(results["uidFetchAll"]["tagged"] == "OK", "UID FETCH 1:* OK")
    check(results["uidFetchAll"]["responses"] == len(uids), "UID FETCH 1:*: one response per message")
    check(sorted(results["uidFetchAll"]["uids"]) == uids, "UID FETCH 1:*: the UIDs of SEARCH ALL")
    check(results["uidFetchAll"]["complete"], "UID FETCH 1:*: UID, FLAGS, ENVELOPE (10 fields), BODYSTRUCTURE each")
    check(results["uidFetchAll"]["subjects"] == ["first", "second"], "UID FETCH 1:*: ENVELOPE subjects")
    check(results["uidFetchAll"]["bodyTypes"] == ["text/plain"] * 2, "UID FETCH 1:*: BODYSTRUCTURE text/plain")

    typ, data = m.uid("STORE", str(uids[0]), "+FLAGS", "(\\Seen \\Flagged)")
    results["store"] = [d.decode() for d in data if d]
    check(any("\\Seen" in d and "\\Flagged" in d for d in results["store"]), "UID STORE +FLAGS: FETCH with both flags")
    typ, data = m.uid("SEARCH", None, "FLAGGED")
    results["flagged"] = data[0].decode()
    check(results["flagged"] == str(uids[0]), "UID SEARCH FLAGGED: the first message")
    tag = m._new_tag().decode()
    m.send(f"{tag} BOGUS\r\n".encode())
    results["bogus"] = m.readline().decode().strip()
    check(results["bogus"].startswith(f"{tag} BAD"), "an unknown command is BAD")
    # A synchronizing literal of 2 GB is refused at once, and the connection goes on.
    tag = m._new_tag().decode()
    m.send(f"{tag} APPEND INBOX {{2147483648}}\r\n".encode())
    results["hugeLiteral"] = m.readline().decode().strip()
    results["hugeLiteralRefused"] = results["hugeLiteral"].startswith((f"{tag} NO", f"{tag} BAD"))
    check(results["hugeLiteralRefused"], "a 2 GB synchronizing literal is refused, no continuation")
    typ, _ = m.noop()
    results["afterHuge"] = typ
    check(typ == "OK", "NOOP after the refused literal")
    # IDLE: a delivery over LMTP arrives as EXISTS.
    tag = m._new_tag().decode()
    m.send(f"{tag} IDLE\r\n".encode())
    results["idleStart"] = m.readline().decode().strip()
    check(results["idleStart"].startswith("+"), "IDLE: continuation")
    results["delivered"] = deliver("while idling", "three")
    check(results["delivered"] == 250, "a delivery over LMTP while idling")
    while True:
        line = m.readline().decode().strip()
        if line.endswith("EXISTS"):
            results["idleHeard"] = line
            break
        if not line:
            results["idleHeard"] = "connection closed"
            break
    exists = re.match(r"\* (\d+) EXISTS$", results["idleHeard"])
    results["idleHeardExists"] = int(exists.group(1)) if exists else None
    check(results["idleHeardExists"] == 3, "IDLE: * 3 EXISTS")
    m.send(b"DONE\r\n")
    results["idleOther"] = []
    while True:
        line = m.readline().decode().strip()
        if line.startswith(tag + " ") or not line:
            results["idleDone"] = line
            break
        results["idleOther"].append(line)
    check(results["idleDone"].startswith(f"{tag} OK"), "IDLE: DONE is OK")
    # MOVE gives COPYUID with the target's UIDVALIDITY and a new UID.
    typ, data = m.uid("MOVE", str(uids[0]), "Archive")
    results["move"] = [d.decode() for d in m.untagged_responses.get("OK", []) if d and b"COPYUID" in d] or \
        [str(x) for x in data]
    results["moveCopyUID"] = any("COPYUID" in x for x in results["move"])
    check(typ == "OK" and results["moveCopyUID"], "UID MOVE: OK with COPYUID")
    typ, data = m.status("Archive", "(MESSAGES UIDNEXT UIDVALIDITY UNSEEN HIGHESTMODSEQ)")
    results["status"] = data[0].decode()
    check("MESSAGES 1" in results["status"] and "UNSEEN 0" in results["status"], "STATUS Archive: 1 message, seen")
    search_by_content(m)
    file_messages(m)
    manage_mailboxes(m)
    keywords(m)
    m.logout()

    # CONDSTORE/QRESYNC on a second connection: ENABLE, SELECT with QRESYNC, FETCH CHANGEDSINCE.
    q = imaplib.IMAP4_SSL("127.0.0.1", int(port), ssl_context=context, timeout=30)
    q.login(user, password)
    typ, data = q._simple_command("ENABLE", "QRESYNC")
    results["enabled"] = [d.decode() for d in q.untagged_responses.pop("ENABLED", [])]
    check(any("QRESYNC" in e.upper() for e in results["enabled"]), "ENABLE QRESYNC")
    typ, data = q._simple_command("SELECT", "INBOX", f"(QRESYNC ({results['uidvalidity']} 1 1:{max(uids) + 5}))")
    results["qresyncSelect"] = typ
    check(typ == "OK", "SELECT with QRESYNC")
    q.state = "SELECTED"
    results["vanished"] = [d.decode() for d in q.untagged_responses.pop("VANISHED", [])]
    vanished = set()
    for v in results["vanished"]:
        if v.upper().startswith("(EARLIER)"):
            vanished |= uid_set(v.split(")", 1)[1].strip())
    results["vanishedIncludesMoved"] = uids[0] in vanished
    check(results["vanishedIncludesMoved"], "QRESYNC SELECT: VANISHED (EARLIER) names the moved UID")
    results["highestmodseq"] = [d.decode() for d in q.untagged_responses.pop("OK", []) if b"HIGHESTMODSEQ" in d]
    check(bool(results["highestmodseq"]), "QRESYNC SELECT: HIGHESTMODSEQ")
    typ, data = q._simple_command("UID", "FETCH", "1:*", "(FLAGS)", "(CHANGEDSINCE 1)")
    results["changedSince"] = [d.decode() for d in q.untagged_responses.pop("FETCH", [])]
    check(typ == "OK" and bool(results["changedSince"]), "UID FETCH CHANGEDSINCE 1: the changed messages")
    q.logout()


try:
    run()
except Exception as error:  # the results so far, and what broke, still go out as JSON
    failures.append(f"exception: {error!r}")
results["failures"] = failures
print(json.dumps(results))
sys.exit(1 if failures else 0)
