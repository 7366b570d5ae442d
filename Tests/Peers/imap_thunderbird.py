"""Thunderbird ESR, headless, as a person's mail client on an IMAP account: it signs in over implicit TLS (the dev CA
in its NSS store), downloads the inbox (headers and, for offline use, every message), and marks one message read,
which it sends back to the server. Server-neutral: the same script runs against mailboxd and against Dovecot.

Usage: imap_thunderbird.py --port IMAP_PORT --lmtp LMTP_PORT --ca CA_FILE --user USER --password PASSWORD
                           --profile-dir DIR [--timeout S]
  Two messages are delivered over LMTP to 127.0.0.1:LMTP_PORT (USER@example.com) first, into an empty INBOX.
  DIR      a fresh Thunderbird profile is made there (prefs for one IMAP account at localhost:IMAP_PORT, SSL/TLS,
           normal password; the CA trusted); a directory not made by this script is never cleared

Thunderbird is driven through Marionette (as the Web Push test drives Firefox), in its chrome context: the account's
password is given to the incoming server, the inbox is asked to update (what "Get Messages" does) and to download
for offline use, and the script waits for the folder's database to hold the messages and their bodies.

Output: one JSON object: version, subjects (the inbox's, sorted), offline (how many are downloaded whole), bodyOfFirst
(the text of the first message, read from Thunderbird's offline store), markedRead (the subject marked read), and
failures (the checks that failed; exit 1 when any). The caller checks on the server that the message became \\Seen.
"""
import argparse
import imaplib
import json
import os
import signal
import ssl
import sys
import time

import lmtp_deliver
import mozilla_headless

MARKER = ".imap-thunderbird-profile"  # only a directory holding this file (or an empty one) is ever cleared
results = {}
failures = []
thunderbird = None
client = None


def check(condition, what):
    if not condition:
        failures.append(what)
    return bool(condition)


def prepare_profile(directory, port, user, marionette_port, ca):
    """A fresh profile: one IMAP account in user.js and an NSS database that trusts the CA."""
    prefs = {
        "mail.accountmanager.accounts": "account1",
        "mail.accountmanager.defaultaccount": "account1",
        "mail.account.account1.server": "server1",
        "mail.account.account1.identities": "id1",
        "mail.identity.id1.fullName": user,
        "mail.identity.id1.useremail": f"{user}@example.com",
        "mail.server.server1.type": "imap",
        "mail.server.server1.hostname": "localhost",
        "mail.server.server1.port": port,
        "mail.server.server1.socketType": 3,  # SSL/TLS from the first byte (RFC 8314)
        "mail.server.server1.authMethod": 3,  # normal password (AUTHENTICATE PLAIN or LOGIN)
        "mail.server.server1.userName": user,
        "mail.server.server1.name": "SignalFetch",
        "mail.server.server1.login_at_startup": False,  # signed in when asked, once the password is set
        "mail.server.server1.check_new_mail": False,
        "mail.server.server1.offline_download": True,
        "mail.server.server1.directory-rel": "[ProfD]ImapMail/localhost",
        # A quiet client (beside mozilla_headless.QUIET_PREFS): no first-run wizard, no default-client prompt.
        "mail.provider.suppress_dialog_on_startup": True,
        "mail.shell.checkDefaultClient": False,
        "mail.spotlight.firstRunDone": True,
        "mail.winsearch.firstRunDone": True,
        "mail.startup.enabledMailCheckOnce": True,
        "mailnews.start_page.enabled": False,
        "mail.rights.version": 1,
        "mailnews.auto_config_url": "",
        "mail.cloud_files.enabled": False,
        "mail.biff.show_alert": False,
        "mail.biff.play_sound": False,
    }
    mozilla_headless.fresh_profile(directory, MARKER, prefs, ca, "SignalFetch test CA", marionette_port)


def start(directory, marionette_port, deadline):
    global thunderbird, client
    thunderbird, client = mozilla_headless.start(
        ["thunderbird", "--headless", "--no-remote", "--marionette", "--remote-allow-system-access", "--profile",
         directory], os.path.join(directory, "thunderbird.log"), marionette_port, deadline)
    client.set_context(client.CONTEXT_CHROME)


def stop():
    """Stops Thunderbird by pid (and its process group)."""
    global thunderbird
    process, thunderbird = thunderbird, None
    mozilla_headless.stop(process)


def js(script, args=None):
    return client.execute_script(script, script_args=args or [], sandbox="system", new_sandbox=False)


# The one account's server and its inbox (null until Thunderbird has listed the server's folders), from the chrome
# context.
INBOX = """
const { MailServices } = ChromeUtils.importESModule("resource:///modules/MailServices.sys.mjs");
const server = MailServices.accounts.accounts[0].incomingServer;
const inbox = server.rootFolder.getFolderWithFlags(Ci.nsMsgFolderFlags.Inbox);
"""


def wait_for(condition, timeout, what):
    """Asks condition() again until it returns a true value; records a failure if the timeout passes first."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            failures.append(f"timed out after {timeout}s waiting for {what}")
            return value
        time.sleep(0.1)


def headers():
    return js(INBOX + """
        const out = [];
        if (!inbox) return out;
        for (const hdr of inbox.messages) {
            out.push({subject: hdr.mime2DecodedSubject, key: hdr.messageKey, read: hdr.isRead,
                      offline: (hdr.flags & Ci.nsMsgMessageFlags.Offline) != 0});
        }
        return out;""")


def server_flags(args, subject):
    """The FLAGS the server has on the INBOX message with this subject, read with EXAMINE (changing nothing)."""
    context = ssl.create_default_context(cafile=args.ca)
    with imaplib.IMAP4_SSL("localhost", args.port, ssl_context=context, timeout=30) as m:
        m.login(args.user, args.password)
        m.select("INBOX", readonly=True)
        typ, data = m.uid("SEARCH", None, "SUBJECT", json.dumps(subject))
        uids = data[0].split() if typ == "OK" and data and data[0] else []
        if not uids:
            return ""
        typ, data = m.uid("FETCH", uids[0].decode(), "(FLAGS)")
        return (data[0] or b"").decode()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ca", required=True)
    parser.add_argument("--user", required=True)
    parser.add_argument("--password", required=True)
    parser.add_argument("--profile-dir", required=True)
    parser.add_argument("--lmtp", type=int, required=True)
    parser.add_argument("--timeout", type=float, default=90)
    args = parser.parse_args()
    args.expect = 2
    for subject in ["hello thunderbird", "second for thunderbird"]:
        check(lmtp_deliver.deliver("127.0.0.1", args.lmtp, args.user, subject)[0] == 250, f"LMTP delivery of {subject}")
    signal.signal(signal.SIGTERM, lambda number, _frame: (stop(), sys.exit(128 + number)))
    directory = os.path.abspath(args.profile_dir)
    marionette_port = mozilla_headless.free_port()
    prepare_profile(directory, args.port, args.user, marionette_port, os.path.abspath(args.ca))
    start(directory, marionette_port, time.monotonic() + args.timeout)
    try:
        results["version"] = js("return Services.appinfo.version;")
        # The password as the account's saved one would be; the server's folders listed (a new account knows none
        # yet, not even its inbox); then "Get Messages" for the inbox.
        js(INBOX + "server.password = arguments[0]; server.performExpand(null); return true;", [args.password])
        wait_for(lambda: js(INBOX + "return inbox != null;"), args.timeout, "Thunderbird to list the server's inbox")
        js(INBOX + "inbox.updateFolder(null); return true;")
        wait_for(lambda: len(headers()) >= args.expect, args.timeout, f"{args.expect} messages in Thunderbird's inbox")
        listed = headers()
        results["subjects"] = sorted(h["subject"] for h in listed)
        check(len(listed) == args.expect, f"Thunderbird lists {args.expect} messages")
        # Every message downloaded whole, as for offline use. The folder may still be busy with the update that listed
        # the headers (NS_MSG_FOLDER_BUSY): asked again until Thunderbird takes the download.
        wait_for(lambda: js(INBOX + """
            try {
                inbox.downloadAllForOffline(null, null);
                return true;
            } catch (error) {
                if (error.result == 0x8055000a) return false;  // NS_MSG_FOLDER_BUSY
                throw error;
            }"""), args.timeout, "Thunderbird to take the offline download (its inbox busy until then)")
        wait_for(lambda: all(h["offline"] for h in headers()), args.timeout, "the messages downloaded for offline use")
        listed = headers()
        results["offline"] = sum(1 for h in listed if h["offline"])
        check(results["offline"] == args.expect, "every message downloaded for offline use")
        first = min(listed, key=lambda h: h["key"]) if listed else None
        if first:
            results["bodyOfFirst"] = js(INBOX + """
                const hdr = inbox.GetMessageHeader(arguments[0]);
                const stream = inbox.getMsgInputStream(hdr);
                const { NetUtil } = ChromeUtils.importESModule("resource://gre/modules/NetUtil.sys.mjs");
                const text = NetUtil.readInputStreamToString(stream, stream.available());
                stream.close();
                return text;""", [first["key"]])
            check(first["subject"] in (results["bodyOfFirst"] or ""), "the downloaded message holds its subject")
            # Read in Thunderbird: the flag goes to the server (STORE +FLAGS \\Seen).
            js(INBOX + "inbox.markMessagesRead([inbox.GetMessageHeader(arguments[0])], true); return true;",
               [first["key"]])
            results["markedRead"] = first["subject"]
            # Thunderbird sends the flag in the background: wait until the server has it, asking it over IMAP.
            seen = wait_for(lambda: "\\Seen" in server_flags(args, first["subject"]), args.timeout,
                            "the read mark to reach the server")
            check(seen, "the message read in Thunderbird is \\Seen on the server")
    finally:
        stop()


try:
    main()
except Exception as error:  # the results so far, and what broke, still go out as JSON
    failures.append(f"exception: {error!r}")
    stop()
results["failures"] = failures
print(json.dumps(results))
sys.exit(1 if failures else 0)
