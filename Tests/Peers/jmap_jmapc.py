"""jmapc (a standard JMAP client) against mailboxd: sync the mailbox, read an email's text and attachment, mark it
seen and see the change, over TLS with the dev CA (REQUESTS_CA_BUNDLE).

Usage: jmap_jmapc.py HOST:PORT USERNAME PASSWORD DOWNLOAD_DIR
Prints one JSON object: what the client saw, for the test to check.
"""

import hashlib
import json
import sys
import threading
from pathlib import Path

from jmapc import Client, EmailQueryFilterCondition, Ref
from jmapc.client import EventSourceConfig
from jmapc.methods import (
    EmailChanges,
    EmailGet,
    EmailQuery,
    EmailSet,
    MailboxGet,
    ThreadGet,
)


def main() -> None:
    host, username, password, download_dir = sys.argv[1:5]
    client = Client.create_with_password(host=host, user=username, password=password)
    out: dict = {"username": client.jmap_session.username, "accountId": client.account_id}

    mailboxes = client.request(MailboxGet(ids=None), raise_errors=True)
    out["mailboxes"] = {m.role: {"id": m.id, "total": m.total_emails, "unread": m.unread_emails} for m in mailboxes.data}
    inbox = out["mailboxes"]["inbox"]["id"]

    # One request, three calls chained by result references (the query's ids, then each email's thread).
    results = client.request(
        [
            EmailQuery(filter=EmailQueryFilterCondition(in_mailbox=inbox), calculate_total=True),
            EmailGet(
                ids=Ref("/ids"),
                properties=["id", "subject", "from", "keywords", "textBody", "bodyValues", "attachments", "threadId"],
                fetch_text_body_values=True,
            ),
            ThreadGet(ids=Ref("/list/*/threadId")),
        ],
        raise_errors=True,
    )
    query, got, threads = (r.response for r in results)
    out["total"] = query.total
    out["threads"] = len(threads.data)
    state = got.state
    emails = []
    for email in got.data:
        text = "".join(email.body_values[part.part_id].value for part in email.text_body or [])
        attachments = []
        for index, part in enumerate(email.attachments or []):
            target = Path(download_dir) / f"{email.id}-{index}"
            client.download_attachment(part, target)
            data = target.read_bytes()
            attachments.append(
                {"name": part.name, "type": part.type, "size": part.size, "bytes": len(data),
                 "sha256": hashlib.sha256(data).hexdigest()}
            )
        emails.append(
            {"id": email.id, "subject": email.subject, "from": [a.email for a in email.mail_from or []],
             "keywords": email.keywords, "text": text, "attachments": attachments}
        )
    out["emails"] = emails

    # Listen for a StateChange, then mark the first email seen: the event names the new Email state. The stream
    # names the state the client last saw (Last-Event-ID), so a change made before it connects is not missed.
    events: list = []
    listening = threading.Event()

    def listen() -> None:
        watcher = Client.create_with_password(
            host=host, user=username, password=password, last_event_id=state,
            event_source_config=EventSourceConfig(types="Email,Mailbox", closeafter="state", ping=0),
        )
        stream = watcher.events
        listening.set()
        for event in stream:
            events.append({"id": event.id, "email": event.data.changed[client.account_id].email})
            break

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    listening.wait(10)
    target = emails[0]["id"]
    updated = client.request(EmailSet(update={target: {"keywords/$seen": True}}), raise_errors=True)
    out["setUpdated"] = sorted((updated.updated or {}).keys())
    changes = client.request(EmailChanges(since_state=state), raise_errors=True)
    out["changes"] = {"created": changes.created, "updated": changes.updated, "destroyed": changes.destroyed,
                      "newState": changes.new_state, "oldState": changes.old_state}
    seen = client.request(EmailGet(ids=[target], properties=["keywords"]), raise_errors=True)
    out["keywordsAfter"] = seen.data[0].keywords
    thread.join(15)
    out["events"] = events
    print(json.dumps(out))


if __name__ == "__main__":
    main()
