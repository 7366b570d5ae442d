"""jmaplib (a JMAP client library) as a device that gets JMAP push through Web Push (RFC 8620 §7.2, RFC 9749).

The device reads the VAPID key from the Session, makes its own P-256 key pair and auth secret with jmaplib,
subscribes at webpush-sim with them (the sim keeps nothing secret and hands the ciphertext on), creates a
PushSubscription for the sim's endpoint, reads the PushVerification out of the push it receives, proves the URL with
the code, and then hears a delivery both through the push and through jmaplib's event source. Every push body is
decrypted twice: by http_ece (the library pywebpush encrypts with) and by jmaplib's read_push.

Usage: jmap_jmaplib_push.py PLAN.json — PLAN is {"sessionUrl", "username", "password", "ca": <PEM path>,
"webPush": <webpush-sim device API base>, "deliveryUrl", "deliveryToken", "deviceClientId"}.
Prints one JSON object: what the client saw, for the test to check. Exits 1 (after printing what it saw, with
"error" and "failures") when a step fails or an observation is not what RFC 8620 §7.2 says.
"""

import base64
import json
import queue
import ssl
import sys
import threading
import time
from datetime import datetime, timedelta, timezone

import http_ece
import httpx
from cryptography.hazmat.primitives.asymmetric import ec

from jmap import CapabilityFieldError
from jmap.auth.credentials import BasicAuth
from jmap.capabilities.push import VAPID_URN
from jmap.client import JMAPClient
from jmap.core.ijson import dumps
from jmap.models.push import PushVerification, StateChange
from jmap.push import (
    EventSourceClient,
    PendingVerification,
    PushKeyPair,
    SSEParser,
    application_server_key,
    mine,
    needs_recreating,
    new_subscription,
    read_push,
    renewal_update,
    verification_update,
)

#: How long a push or an event may take to arrive.
ARRIVAL_SECONDS = 15.0
#: How long silence must last to count as "nothing was pushed".
SILENCE_SECONDS = 2.0


class StepFailed(Exception):
    """A step that the rest of the flow depends on did not happen."""


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def utc_date(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_utc_date(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)


class Inbox:
    """Items arriving on a background thread, kept in order; waiting takes them one by one."""

    def __init__(self) -> None:
        self.items: "queue.Queue" = queue.Queue()
        self.connected = threading.Event()
        self.failure: "str | None" = None

    def next(self, timeout: float):
        try:
            return self.items.get(timeout=timeout)
        except queue.Empty:
            return None

    def drain(self, seconds: float) -> list:
        """Everything that arrives within `seconds`."""
        deadline = time.monotonic() + seconds
        arrived = []
        while (left := deadline - time.monotonic()) > 0:
            item = self.next(left)
            if item is not None:
                arrived.append(item)
        return arrived


def read_sim_messages(http: httpx.Client, url: str, inbox: Inbox) -> None:
    """webpush-sim's message stream for the device's subscription: each event's data, parsed, into `inbox`."""
    parser = SSEParser()
    try:
        with http.stream("GET", url, timeout=httpx.Timeout(10.0, read=None)) as response:
            if response.status_code != 200:
                inbox.failure = f"webpush-sim's message stream answered {response.status_code}"
                inbox.connected.set()
                return
            inbox.connected.set()
            for chunk in response.iter_bytes():
                for event in parser.feed_bytes(chunk):
                    inbox.items.put(json.loads(event.data))
    except Exception as error:  # the stream ends when the process does; anything earlier is reported
        inbox.failure = f"webpush-sim's message stream failed: {type(error).__name__}: {error}"
        inbox.connected.set()


def read_event_source(events: EventSourceClient, inbox: Inbox) -> None:
    """jmaplib's event source: each StateChange into `inbox` (pings are skipped)."""
    try:
        for event in events.listen():
            if isinstance(event, StateChange):
                inbox.items.put(event)
    except Exception as error:
        inbox.failure = f"the event source failed: {type(error).__name__}: {error}"
        inbox.connected.set()


class Device:
    def __init__(self, plan: dict) -> None:
        self.plan = plan
        self.out: dict = {}
        self.failures: list[str] = []
        self.event_source = Inbox()
        tls = ssl.create_default_context(cafile=plan["ca"])

        def on_response(response: httpx.Response) -> None:
            # Called once the headers are in, before a stream's body is read: the event source is then listening.
            if response.request.url.path.endswith("/eventsource") and response.status_code == 200:
                self.event_source.connected.set()

        self.http = httpx.Client(
            verify=tls, follow_redirects=True, timeout=30.0, event_hooks={"response": [on_response]}
        )
        # webpush-sim's device API (plain HTTP on loopback), and mailboxd's delivery API (its own token).
        self.plain = httpx.Client(timeout=30.0)
        self.api = httpx.Client(verify=tls, timeout=30.0)
        self.client = JMAPClient.connect(
            plan["sessionUrl"], auth=BasicAuth(plan["username"], plan["password"]), http=self.http
        )
        self.account = self.client.default_account
        self.keys = PushKeyPair.generate()
        self.pushes = Inbox()

    def check(self, condition: bool, message: str) -> None:
        if not condition:
            self.failures.append(message)

    # -- the steps ---------------------------------------------------------- #
    def deliver(self, subject: str) -> None:
        """A message arrives for the account (mailboxd's delivery API)."""
        response = self.api.post(
            self.plan["deliveryUrl"],
            headers={"Authorization": f"Bearer {self.plan['deliveryToken']}"},
            json={"to": self.plan["username"], "from": "sender@example.com", "subject": subject, "body": subject},
        )
        if response.status_code != 201:
            raise StepFailed(f"the delivery was refused: {response.status_code} {response.text}")

    def email_state(self) -> str:
        with self.client.batch() as batch:
            got = batch.mail.email.get(ids=[])
        return got.result.state

    def open_push_stream(self) -> str:
        vapid = application_server_key(self.client.session)
        if vapid is None:
            raise StepFailed(f"the Session has no {VAPID_URN} capability with an applicationServerKey")
        self.out["vapidKey"] = vapid
        self.out["vapidKeyBytes"] = len(unb64(vapid))
        self.out["needsRecreating"] = needs_recreating(self.client.session, vapid)
        created = self.plain.post(
            self.plan["webPush"] + "/sim/subscriptions",
            json={"applicationServerKey": vapid, "keys": self.keys.keys.to_wire()},
        )
        if created.status_code != 201:
            raise StepFailed(f"webpush-sim refused the subscription: {created.status_code} {created.text}")
        answer = created.json()
        self.out["simSubscriptionId"] = answer["id"]
        self.out["simKeysKept"] = answer["subscription"]["keys"] == self.keys.keys.to_wire()
        url = f"{self.plan['webPush']}/sim/subscriptions/{answer['id']}/messages"
        threading.Thread(target=read_sim_messages, args=(self.plain, url, self.pushes), daemon=True).start()
        if not self.pushes.connected.wait(10) or self.pushes.failure:
            raise StepFailed(self.pushes.failure or "webpush-sim's message stream did not open")
        return answer["subscription"]["endpoint"]

    def decrypt(self, message: dict) -> tuple[dict, object, int]:
        """A push as http_ece reads it (the JSON object) and as jmaplib reads it; and its body's length."""
        if message.get("plaintext") is not None:
            self.failures.append("webpush-sim decrypted a push meant for the device's own keys")
        body = unb64(message["body"])
        private = ec.derive_private_key(int.from_bytes(unb64(self.keys.private_key), "big"), ec.SECP256R1())
        plaintext = http_ece.decrypt(body, private_key=private, auth_secret=unb64(self.keys.auth), version="aes128gcm")
        return json.loads(plaintext), read_push(body, self.keys), len(body)

    def subscribe(self, endpoint: str) -> tuple[str, str]:
        requested = datetime.now(timezone.utc) + timedelta(days=30)
        creation = new_subscription(
            self.plan["deviceClientId"], endpoint, types=["Email"], keys=self.keys.keys, expires=utc_date(requested)
        )
        with self.client.batch() as batch:
            made = batch.core.push_subscription.set(create={"device": creation})
        result = made.result
        subscription_id = result.created_id("device")
        if subscription_id is None:
            errors = {key: (error.type, error.properties) for key, error in result.creation_errors.items()}
            raise StepFailed(f"PushSubscription/set did not create the subscription: {errors}")
        expires = result.created["device"].expires
        self.out["created"] = {"id": subscription_id, "expires": expires, "requestedExpires": utc_date(requested)}
        if expires is not None:
            left = parse_utc_date(expires) - datetime.now(timezone.utc)
            self.out["created"]["expiresInSeconds"] = left.total_seconds()

        # The verification may arrive before the create's answer did (§7.2.3): codes are kept until claimed.
        pending = PendingVerification()
        message = self.pushes.next(ARRIVAL_SECONDS)
        if message is None:
            raise StepFailed(f"no PushVerification reached the endpoint in {ARRIVAL_SECONDS} s")
        ece, parsed, length = self.decrypt(message)
        if not isinstance(parsed, PushVerification):
            raise StepFailed(f"the first push is not a PushVerification: {ece}")
        pending.record(parsed)
        code = pending.claim(subscription_id)
        self.out["verification"] = {
            "ece": ece,
            "jmaplib": {
                "type": parsed.type_,
                "pushSubscriptionId": parsed.push_subscription_id,
                "verificationCode": parsed.verification_code,
            },
            "claimed": code,
            "bodyLength": length,
            "bodyBytes": message.get("bodyBytes"),
            "ttl": message.get("ttl"),
            "urgency": message.get("urgency"),
        }
        if code is None:
            raise StepFailed(f"the PushVerification names {parsed.push_subscription_id}, not {subscription_id}")
        return subscription_id, code

    def verify(self, subscription_id: str, code: str) -> None:
        # Before the code comes back the server must push nothing, even when the account changes.
        self.deliver("before verification")
        self.out["stateBeforeVerification"] = self.email_state()
        early = self.pushes.drain(SILENCE_SECONDS)
        self.out["pushesBeforeVerification"] = len(early)

        with self.client.batch() as batch:
            wrong = batch.core.push_subscription.set(
                update={subscription_id: verification_update(code[::-1] + "x")}
            )
        errors = wrong.result.update_errors
        refused = errors.get(subscription_id)
        self.out["wrongCode"] = {
            "updated": subscription_id in wrong.result.updated,
            "type": refused.type if refused else None,
            "properties": list(refused.properties or ()) if refused else None,
        }

        with self.client.batch() as batch:
            right = batch.core.push_subscription.set(update={subscription_id: verification_update(code)})
        self.out["verified"] = subscription_id in right.result.updated
        if not self.out["verified"]:
            errors = {key: (error.type, error.properties) for key, error in right.result.update_errors.items()}
            raise StepFailed(f"the right verification code was refused: {errors}")

    def hear_a_change(self) -> None:
        events = EventSourceClient(self.client, types=["Email"])
        threading.Thread(target=read_event_source, args=(events, self.event_source), daemon=True).start()
        if not self.event_source.connected.wait(10) or self.event_source.failure:
            raise StepFailed(self.event_source.failure or "the event source did not open")
        self.out["eventSourceOpened"] = True

        delivered = time.monotonic()
        self.deliver("after verification")
        state = self.email_state()
        self.out["emailState"] = state

        pushed: list[dict] = []
        matched_push = None
        deadline = time.monotonic() + ARRIVAL_SECONDS
        while matched_push is None and time.monotonic() < deadline:
            message = self.pushes.next(deadline - time.monotonic())
            if message is None:
                break
            ece, parsed, length = self.decrypt(message)
            entry = {"ece": ece, "bodyLength": length, "bodyBytes": message.get("bodyBytes")}
            if isinstance(parsed, StateChange):
                entry["jmaplib"] = parsed.changed
                if parsed.matches(self.account, "Email", state):
                    matched_push = entry
                    self.out["pushSeconds"] = round(time.monotonic() - delivered, 3)
            pushed.append(entry)
        self.out["pushes"] = pushed
        self.out["pushedStateChange"] = matched_push
        self.out["pushedTypes"] = sorted(
            {name for entry in pushed for states in entry["ece"].get("changed", {}).values() for name in states}
        )
        self.out["pushedTypesAll"] = all(entry["ece"].get("@type") == "StateChange" for entry in pushed)

        heard: list[dict] = []
        matched_event = None
        deadline = time.monotonic() + ARRIVAL_SECONDS
        while matched_event is None and time.monotonic() < deadline:
            event = self.event_source.next(deadline - time.monotonic())
            if event is None:
                break
            heard.append(event.changed)
            if event.matches(self.account, "Email", state):
                matched_event = event.changed
        self.out["events"] = heard
        self.out["eventSourceStateChange"] = matched_event

    def renew(self, subscription_id: str) -> None:
        """Asks for 30 more days; the server may only shorten that, and says what it set."""
        requested = datetime.now(timezone.utc) + timedelta(days=30)
        with self.client.batch() as batch:
            renewed = batch.core.push_subscription.set(
                update={subscription_id: renewal_update(utc_date(requested))}
            )
        result = renewed.result
        answer = result.updated.get(subscription_id)
        expires = answer.expires if answer is not None else None
        self.out["renewal"] = {
            "updated": subscription_id in result.updated,
            "requestedExpires": utc_date(requested),
            "expires": expires,
        }
        if expires is not None:
            self.out["renewal"]["expiresInSeconds"] = (
                parse_utc_date(expires) - datetime.now(timezone.utc)
            ).total_seconds()

    def read_back(self, subscription_id: str) -> None:
        with self.client.batch() as batch:
            got = batch.core.push_subscription.get(ids=None)
        listed = mine(got.result.items, self.plan["deviceClientId"])
        self.out["get"] = [
            {
                "id": item.id,
                "deviceClientId": item.device_client_id,
                "verificationCode": item.verification_code,
                "expires": item.expires,
                "types": item.types,
                # What the server sent, as opposed to what the model defaults.
                "properties": sorted(item.model_fields_set),
                "hasUrl": "url" in item.model_fields_set,
                "hasKeys": "keys" in item.model_fields_set,
            }
            for item in listed
        ]

        # jmaplib refuses to ask for url or keys; the server is asked anyway, to see it answer `forbidden`.
        forbidden: dict = {}
        for name in ("url", "keys"):
            try:
                with self.client.batch() as batch:
                    batch.core.push_subscription.get(ids=[subscription_id], properties=["id", name])
                refused_locally = False
            except CapabilityFieldError:
                refused_locally = True
            request = {
                "using": ["urn:ietf:params:jmap:core"],
                "methodCalls": [["PushSubscription/get", {"ids": [subscription_id], "properties": ["id", name]}, "g"]],
            }
            answer = self.http.post(
                self.client.session.api_url, content=dumps(request).encode(),
                headers={"Content-Type": "application/json"},
            )
            responses = answer.json().get("methodResponses", []) if answer.status_code == 200 else []
            first = responses[0] if responses else [None, {}, None]
            forbidden[name] = {
                "refusedLocally": refused_locally,
                "status": answer.status_code,
                "response": first[0],
                "type": first[1].get("type"),
            }
        self.out["forbidden"] = forbidden

    def unsubscribe(self, subscription_id: str) -> None:
        with self.client.batch() as batch:
            gone = batch.core.push_subscription.set(destroy=[subscription_id])
        self.out["destroyed"] = subscription_id in gone.result.destroyed
        with self.client.batch() as batch:
            after = batch.core.push_subscription.get(ids=[subscription_id])
        self.out["getAfterDestroy"] = {
            "list": [item.id for item in after.result.items],
            "notFound": list(after.result.not_found or []),
        }

        # The account changes again: the event source hears it, the endpoint hears nothing.
        self.deliver("after destroy")
        state = self.email_state()
        heard = None
        deadline = time.monotonic() + ARRIVAL_SECONDS
        while heard is None and time.monotonic() < deadline:
            event = self.event_source.next(deadline - time.monotonic())
            if event is None:
                break
            if event.matches(self.account, "Email", state):
                heard = event.changed
        self.out["afterDestroy"] = {
            "emailState": state,
            "eventSourceHeard": heard is not None,
            "pushes": len(self.pushes.drain(SILENCE_SECONDS)),
        }

    def run(self) -> None:
        self.out["username"] = self.client.session.username
        self.out["accountId"] = self.account
        endpoint = self.open_push_stream()
        subscription_id, code = self.subscribe(endpoint)
        self.verify(subscription_id, code)
        self.hear_a_change()
        self.renew(subscription_id)
        self.read_back(subscription_id)
        self.unsubscribe(subscription_id)
        self.judge(subscription_id, code)

    def judge(self, subscription_id: str, code: str) -> None:
        """The observations against RFC 8620 §7.2; each mismatch is a failure named in the output."""
        out = self.out
        verification = out["verification"]
        self.check(
            verification["ece"] == {"@type": "PushVerification", "pushSubscriptionId": subscription_id,
                                    "verificationCode": code},
            f"the PushVerification as http_ece reads it: {verification['ece']}",
        )
        self.check(verification["jmaplib"]["verificationCode"] == code, "jmaplib and http_ece read different codes")
        self.check(verification["bodyLength"] == 512, f"the verification body is {verification['bodyLength']} bytes")
        self.check(out["pushesBeforeVerification"] == 0, "something was pushed before the code came back")
        self.check(out["wrongCode"]["type"] == "invalidProperties", f"a wrong code: {out['wrongCode']}")
        expires_in = out["created"].get("expiresInSeconds")
        self.check(
            expires_in is not None and expires_in <= 7 * 86_400 + 60, f"expires was not capped: {out['created']}"
        )
        push = out["pushedStateChange"]
        self.check(push is not None, f"no pushed StateChange names Email state {out['emailState']}: {out['pushes']}")
        if push is not None:
            self.check(push["ece"].get("changed") == push.get("jmaplib"), "jmaplib and http_ece read different pushes")
            self.check(push["bodyLength"] == 512, f"a StateChange body is {push['bodyLength']} bytes")
        self.check(
            all(entry["ece"].get("changed", {}).get(self.account, {}).get("Email") != out["stateBeforeVerification"]
                for entry in out["pushes"]),
            "the change made before verification was pushed after it",
        )
        renewal = out["renewal"].get("expiresInSeconds")
        self.check(renewal is not None and renewal <= 7 * 86_400 + 60, f"a renewal was not capped: {out['renewal']}")
        self.check(out["pushedTypes"] in ([], ["Email"]), f"types other than Email were pushed: {out['pushedTypes']}")
        self.check(out["eventSourceStateChange"] is not None, f"the event source never named {out['emailState']}")
        mine_ = [item for item in out["get"] if item["id"] == subscription_id]
        self.check(
            len(mine_) == 1 and mine_[0]["verificationCode"] == code and not mine_[0]["hasUrl"]
            and not mine_[0]["hasKeys"],
            f"PushSubscription/get: {out['get']}",
        )
        for name, answer in out["forbidden"].items():
            self.check(answer["response"] == "error" and answer["type"] == "forbidden", f"asking for {name}: {answer}")
        self.check(out["destroyed"], "the subscription was not destroyed")
        self.check(out["afterDestroy"]["eventSourceHeard"], "the event source did not hear the last delivery")
        self.check(out["afterDestroy"]["pushes"] == 0, "a destroyed subscription was still pushed to")


def main() -> int:
    with open(sys.argv[1], encoding="utf-8") as file:
        plan = json.load(file)
    device = None
    code = 0
    try:
        device = Device(plan)
        device.run()
    except StepFailed as error:
        code = 1
        message = str(error)
    except Exception as error:  # any other failure is reported with its kind
        code = 1
        message = f"{type(error).__name__}: {error}"
    out = device.out if device else {}
    failures = device.failures if device else []
    if code:
        out["error"] = message
        print(f"jmap_jmaplib_push: {message}", file=sys.stderr)
    if failures:
        code = 1
        out["failures"] = failures
        print("jmap_jmaplib_push: " + "; ".join(failures), file=sys.stderr)
    print(json.dumps(out, default=str))
    return code


if __name__ == "__main__":
    sys.exit(main())
