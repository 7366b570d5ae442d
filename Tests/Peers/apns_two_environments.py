"""A Python peer for APNsSimulatorTests: aioapns sends to apns-sim's production and sandbox listeners, one device in each. Prints the results as JSON."""
import asyncio, json, ssl, sys
from aioapns import APNs, NotificationRequest, PushType
import aioapns.connection as connection

production_port, sandbox_port, ca, key_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
production_token, sandbox_token = sys.argv[5], sys.argv[6]
connection.APNsProductionClientProtocol.APNS_SERVER = "127.0.0.1"
connection.APNsProductionClientProtocol.APNS_PORT = production_port
connection.APNsDevelopmentClientProtocol.APNS_SERVER = "127.0.0.1"
connection.APNsDevelopmentClientProtocol.APNS_PORT = sandbox_port
context = ssl.create_default_context(cafile=ca)

async def main():
    results = {}
    for name, use_sandbox in (("production", False), ("sandbox", True)):
        client = APNs(key=open(key_path).read(), key_id="KEY1234567", team_id="TEAM123456",
                      topic="com.example.mail", use_sandbox=use_sandbox, ssl_context=context)
        for token_name, token in (("production", production_token), ("sandbox", sandbox_token)):
            request = NotificationRequest(device_token=token, message={"aps": {"badge": 1}},
                                          push_type=PushType.ALERT, time_to_live=3600)
            result = await client.send_notification(request)
            results[f"{name}->{token_name}"] = {"status": result.status, "reason": result.description}
    print(json.dumps(results))

asyncio.run(asyncio.wait_for(main(), 60))
