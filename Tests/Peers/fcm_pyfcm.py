"""A second real FCM sender for the fcm-sim tests: pyfcm 2.x (FCMNotification.notify, over requests).

Usage: fcm_pyfcm.py PLAN.json — PLAN as for fcm_firebase_admin.py; pyfcm's endpoint base is overridden in a
subclass and the service account's token_uri by PLAN.tokenURI. Prints one JSON line per send:
{"case", "ok": true, "name"} or {"case", "ok": false, "error": <exception class>, "message"}.
"""
import json
import sys
import time

from google.oauth2 import service_account
from pyfcm import FCMNotification
from pyfcm.errors import FCMError

plan = json.load(open(sys.argv[1]))
info = json.load(open(plan["serviceAccount"]))
info["token_uri"] = plan["tokenURI"]


class LocalFCM(FCMNotification):
    FCM_END_POINT_BASE = plan["fcmBase"] + "/v1/projects"


credentials = service_account.Credentials.from_service_account_info(
    info, scopes=["https://www.googleapis.com/auth/firebase.messaging"])
fcm = LocalFCM(credentials=credentials, project_id=info["project_id"])

for send in plan["sends"]:
    if send.get("sleepBefore"):
        time.sleep(send["sleepBefore"])
    android = {"priority": send.get("priority", "high")}
    if send.get("collapseKey"):
        android["collapse_key"] = send["collapseKey"]
    result = {"case": send["case"]}
    try:
        answer = fcm.notify(fcm_token=send["token"], data_payload=send.get("data", {}), android_config=android)
        result.update(ok=True, name=answer.get("name"))
    except FCMError as error:
        result.update(ok=False, error=type(error).__name__, message=str(error)[:300])
    print(json.dumps(result), flush=True)
