"""Waits in IMAP IDLE for a new message: logs in over TLS, selects INBOX, starts IDLE, prints "idling" (flushed) and
then waits for an EXISTS above the count SELECT gave, up to 60 seconds. Arguments: port, CA file, username,
password. Prints {"exists": N, "before": M} as JSON, or {"error": "..."} and exits 1."""
import imaplib, json, ssl, sys

port, ca, user, password = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
m = imaplib.IMAP4_SSL("127.0.0.1", port, ssl_context=ssl.create_default_context(cafile=ca), timeout=60)
m.login(user, password)
typ, data = m.select("INBOX")
before = int(data[0])
tag = m._new_tag().decode()
m.send(f"{tag} IDLE\r\n".encode())
if not m.readline().startswith(b"+"):
    print(json.dumps({"error": "IDLE was not accepted"}))
    sys.exit(1)
print("idling", flush=True)
while True:
    line = m.readline().decode().strip()
    if not line:
        print(json.dumps({"error": "the connection closed"}))
        sys.exit(1)
    if line.endswith(" EXISTS") and int(line.split()[1]) > before:
        m.send(b"DONE\r\n")
        print(json.dumps({"exists": int(line.split()[1]), "before": before}))
        break
