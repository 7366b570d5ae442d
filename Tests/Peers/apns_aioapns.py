"""A Python peer for APNsSimulatorTests: aioapns sends to apns-sim over TLS with a provider token. Arguments: port, CA, key, device token. Prints the results as JSON."""
import asyncio, json, ssl, sys
from aioapns import APNs, NotificationRequest, PushType
import aioapns.connection as connection

port, ca, key_path, token = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
connection.APNsDevelopmentClientProtocol.APNS_SERVER = "127.0.0.1"
connection.APNsTLSClientProtocol.APNS_PORT = port
context = ssl.create_default_context(cafile=ca)

async def main():
    client = APNs(key=open(key_path).read(), key_id="KEY1234567", team_id="TEAM123456",
                  topic="com.example.mail", use_sandbox=True, ssl_context=context)
    requests = {
        "background": NotificationRequest(device_token=token, message={"aps": {"content-available": 1}, "st": "s1"},
                                          priority=5, push_type=PushType.BACKGROUND, time_to_live=3600),
        "badge": NotificationRequest(device_token=token, message={"aps": {"badge": 4}},
                                     push_type=PushType.ALERT, time_to_live=3600),
        "badToken": NotificationRequest(device_token="00" * 31 + "zz", message={"aps": {"badge": 1}},
                                        push_type=PushType.ALERT),
        "tooLarge": NotificationRequest(device_token=token, message={"aps": {"badge": 1}, "pad": "x" * 5000},
                                        push_type=PushType.ALERT),
    }
    results = {}
    for name, request in requests.items():
        result = await client.send_notification(request)
        results[name] = {"status": result.status, "reason": result.description, "id": result.notification_id}
    print(json.dumps(results))

asyncio.run(asyncio.wait_for(main(), 60))
