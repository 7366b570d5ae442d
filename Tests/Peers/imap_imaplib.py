"""Python's imaplib against an IMAP server over TLS, at the wire level: login, LIST with special-use, SELECT,
FETCH, STORE, SEARCH, MOVE with COPYUID, CONDSTORE/QRESYNC, IDLE hearing a delivery, and refusals. Arguments: IMAP
port, CA file, username, password, API URL, delivery-token file. A delivery is made through the API while idling.
Prints one JSON object of results."""
import imaplib, json, socket, ssl, sys, urllib.request

port, ca, user, password, api, token_file = sys.argv[1:7]
context = ssl.create_default_context(cafile=ca)
results = {}

def deliver(subject):
    token = open(token_file).read().strip()
    body = json.dumps({"to": user, "from": "Carol <carol@example.com>", "subject": subject, "body": "b"}).encode()
    request = urllib.request.Request(api + "/v1/deliveries", data=body, method="POST", headers={
        "Authorization": "Bearer " + token, "Content-Type": "application/json"})
    with urllib.request.urlopen(request, context=context, timeout=30) as answer:
        return answer.status

m = imaplib.IMAP4_SSL("127.0.0.1", int(port), ssl_context=context, timeout=30)
results["capabilities"] = list(m.capabilities)
try:
    m.login(user, "not-the-password")
    results["wrongPassword"] = "OK"
except imaplib.IMAP4.error as error:
    results["wrongPassword"] = str(error)
typ, _ = m.login(user, password)
results["login"] = typ
typ, lines = m.list()
results["list"] = [line.decode() for line in lines]
typ, data = m.select("INBOX")
results["exists"] = int(data[0])
results["uidvalidity"] = int(m.untagged_responses.get("UIDVALIDITY", [b"0"])[0])
typ, data = m.uid("SEARCH", None, "ALL")
uids = [int(x) for x in data[0].split()]
results["uids"] = uids
typ, data = m.fetch("1", "(UID FLAGS RFC822.SIZE ENVELOPE BODY.PEEK[])")
results["fetch"] = [part.decode("utf-8", "replace") if isinstance(part, bytes) else
                    [p.decode("utf-8", "replace") for p in part] for part in data]
typ, data = m.uid("STORE", str(uids[0]), "+FLAGS", "(\\Seen \\Flagged)")
results["store"] = [d.decode() for d in data if d]
typ, data = m.uid("SEARCH", None, "FLAGGED")
results["flagged"] = data[0].decode()
tag = m._new_tag().decode()
m.send(f"{tag} BOGUS\r\n".encode())
results["bogus"] = m.readline().decode().strip()
# A synchronizing literal of 2 GB is refused at once, and the connection goes on.
tag = m._new_tag().decode()
m.send(f"{tag} APPEND INBOX {{2147483648}}\r\n".encode())
results["hugeLiteral"] = m.readline().decode().strip()
typ, _ = m.noop()
results["afterHuge"] = typ
# IDLE: a delivery through the API arrives as EXISTS.
tag = m._new_tag().decode()
m.send(f"{tag} IDLE\r\n".encode())
results["idleStart"] = m.readline().decode().strip()
results["delivered"] = deliver("while idling")
while True:
    line = m.readline().decode().strip()
    if line.endswith("EXISTS"):
        results["idleHeard"] = line
        break
    if not line:
        results["idleHeard"] = "connection closed"
        break
m.send(b"DONE\r\n")
results["idleDone"] = m.readline().decode().strip()
# MOVE gives COPYUID with the target's UIDVALIDITY and a new UID.
typ, data = m.uid("MOVE", str(uids[0]), "Archive")
results["move"] = [d.decode() for d in m.untagged_responses.get("OK", []) if d and b"COPYUID" in d] or \
    [str(x) for x in data]
typ, data = m.status("Archive", "(MESSAGES UIDNEXT UIDVALIDITY UNSEEN HIGHESTMODSEQ)")
results["status"] = data[0].decode()
m.logout()

# CONDSTORE/QRESYNC on a second connection: ENABLE, SELECT with QRESYNC, FETCH CHANGEDSINCE.
q = imaplib.IMAP4_SSL("127.0.0.1", int(port), ssl_context=context, timeout=30)
q.login(user, password)
typ, data = q._simple_command("ENABLE", "QRESYNC")
results["enabled"] = [d.decode() for d in q.untagged_responses.pop("ENABLED", [])]
typ, data = q._simple_command("SELECT", "INBOX", f"(QRESYNC ({results['uidvalidity']} 1 1:{max(uids) + 5}))")
results["qresyncSelect"] = typ
q.state = "SELECTED"
results["vanished"] = [d.decode() for d in q.untagged_responses.pop("VANISHED", [])]
results["highestmodseq"] = [d.decode() for d in q.untagged_responses.pop("OK", []) if b"HIGHESTMODSEQ" in d]
typ, data = q._simple_command("UID", "FETCH", "1:*", "(FLAGS)", "(CHANGEDSINCE 1)")
results["changedSince"] = [d.decode() for d in q.untagged_responses.pop("FETCH", [])]
q.logout()
print(json.dumps(results))
