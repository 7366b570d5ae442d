"""Python's smtplib as an SMTP client: sends messages over one session, each with its own envelope and options.

Usage: smtp_send.py PORT < PLAN — connects to 127.0.0.1:PORT; PLAN (JSON on standard input) is a list of
{"from": <envelope sender>, "to": [<envelope recipient>, …], "mailOptions": [<MAIL FROM parameter>, …],
"charset": <how to encode the message, e.g. "iso-8859-1">, "message": <the whole message, headers and body>}.
Exits non-zero, with smtplib's exception on standard error, when smtplib raises (e.g. the server refuses the
sender, every recipient or the message); recipients refused one by one are not reported.
"""
import json
import smtplib
import sys

plan = json.loads(sys.stdin.buffer.read())
with smtplib.SMTP("127.0.0.1", int(sys.argv[1])) as smtp:
    for mail in plan:
        smtp.sendmail(
            mail["from"], mail["to"], mail["message"].encode(mail["charset"]), mail_options=mail["mailOptions"])
