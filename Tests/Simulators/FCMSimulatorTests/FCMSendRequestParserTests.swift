import FCMSimulator
import Foundation
import Testing

@Suite struct FCMSendRequestParserTests {
    private func parse(_ json: String) throws(FCMAPIError) -> FCMSendRequest {
        try FCMSendRequestParser.parse(Data(json.utf8))
    }

    /// The 400's message, field and code, for a body that must be refused.
    private func refusal(_ json: String, sourceLocation: SourceLocation = #_sourceLocation) -> FCMAPIError? {
        do {
            let request = try parse(json)
            Issue.record("accepted: \(request)", sourceLocation: sourceLocation)
            return nil
        } catch {
            #expect(error.code == 400, sourceLocation: sourceLocation)
            #expect(error.status == "INVALID_ARGUMENT", sourceLocation: sourceLocation)
            #expect(error.errorCode == .invalidArgument, sourceLocation: sourceLocation)
            return error
        }
    }

    @Test func aFullMessageParses() throws {
        let request = try parse(
            #"""
            {"validate_only":false,"message":{"name":"n","token":"t1","data":{"acct":"a","st":"s"},
             "notification":{"title":"T","body":"B"},"fcm_options":{"analytics_label":"x"},"apns":{},"webpush":{},
             "android":{"priority":"HIGH","ttl":"3.5s","collapse_key":"mail","restricted_package_name":"com.x.y",
                        "direct_boot_ok":true}}}
            """#)
        #expect(request.target == .token("t1"))
        #expect(request.data == ["acct": "a", "st": "s"])
        #expect(request.priority == .high)
        #expect(request.ttl == 3.5)
        #expect(request.collapseKey == "mail")
        #expect(request.hasNotification)
        #expect(!request.validateOnly)
        // lowerCamelCase names are proto3 JSON too; lower-case priority is accepted.
        let camel = try parse(
            #"{"validateOnly":true,"message":{"topic":"news","android":{"collapseKey":"k","priority":"normal"}}}"#)
        #expect(camel.validateOnly)
        #expect(camel.target == .topic("news"))
        #expect(camel.collapseKey == "k")
        #expect(camel.priority == .normal)
        #expect(try parse(#"{"message":{"condition":"'a' in topics"}}"#).target == .condition("'a' in topics"))
        // android.data replaces message.data.
        #expect(
            try parse(#"{"message":{"token":"t","data":{"a":"1"},"android":{"data":{"b":"2"}}}}"#).data == ["b": "2"])
    }

    @Test func unknownFieldsAreNamed() {
        #expect(refusal(#"{"message":{"token":"t"},"extra":1}"#)?.message.contains(#"Unknown name "extra""#) == true)
        let inMessage = refusal(#"{"message":{"token":"t","priority":"high"}}"#)
        #expect(
            inMessage?.message
                == #"Invalid JSON payload received. Unknown name "priority" at 'message': Cannot find field."#)
        #expect(inMessage?.field == "message")
        #expect(refusal(#"{"message":{"token":"t","android":{"time_to_live":"1s"}}}"#)?.field == "message.android")
        #expect(refusal(#"{"message":{"token":"t","notification":{"sound":"x"}}}"#)?.field == "message.notification")
        #expect(refusal("not json")?.message.contains("Invalid JSON payload") == true)
        #expect(refusal("[1]") != nil)
        #expect(refusal("{}")?.field == "message")
    }

    @Test func exactlyOneTarget() {
        #expect(refusal(#"{"message":{"data":{"a":"b"}}}"#)?.message == "Recipient of the message is not set.")
        #expect(refusal(#"{"message":{"token":"t","topic":"x"}}"#)?.message.contains("oneof field 'target'") == true)
        #expect(refusal(#"{"message":{"topic":"a","condition":"'a' in topics"}}"#) != nil)
        #expect(refusal(#"{"message":{"token":""}}"#)?.field == "message.token")
        #expect(refusal(#"{"message":{"token":5}}"#)?.field == "message.token")
        #expect(refusal(#"{"message":{"topic":"/topics/news"}}"#)?.field == "message.topic")
    }

    @Test func dataValuesMustBeStringsAndSmall() throws {
        #expect(
            refusal(#"{"message":{"token":"t","data":{"badge":4}}}"#)?.message
                == "Invalid value at 'message.data[0].value' (TYPE_STRING), 4")
        #expect(refusal(#"{"message":{"token":"t","data":{"a":"x","b":true}}}"#)?.field == "message.data[1].value")
        #expect(refusal(#"{"message":{"token":"t","data":["a"]}}"#)?.field == "message.data")
        #expect(refusal(#"{"message":{"token":"t","data":{"from":"x"}}}"#)?.message == "Invalid data payload key: from")
        #expect(refusal(#"{"message":{"token":"t","data":{"google.x":"x"}}}"#) != nil)
        let fits = String(repeating: "x", count: 4096 - 1)
        #expect(try parse(#"{"message":{"token":"t","data":{"k":"\#(fits)"}}}"#).data["k"]?.count == 4095)
        let big = String(repeating: "x", count: 4096)
        #expect(refusal(#"{"message":{"token":"t","data":{"k":"\#(big)"}}}"#)?.message == "Android message is too big")
    }

    @Test func priorityAndTTL() throws {
        #expect(try parse(#"{"message":{"token":"t","android":{"priority":"High"}}}"#).priority == .high)
        #expect(try parse(#"{"message":{"token":"t"}}"#).priority == .normal)
        #expect(
            refusal(#"{"message":{"token":"t","android":{"priority":"urgent"}}}"#)?.field
                == "message.android.priority")
        #expect(refusal(#"{"message":{"token":"t","android":{"priority":10}}}"#) != nil)
        for (text, seconds) in [
            ("3600s", 3600.0), ("3.5s", 3.5), ("0s", 0), ("2419200s", 2_419_200), ("0.000000001s", 1e-9),
        ] {
            #expect(try parse(#"{"message":{"token":"t","android":{"ttl":"\#(text)"}}}"#).ttl == seconds, "\(text)")
        }
        for text in ["3600", "1h", "-1s", "s", ".5s", "1.s", "1.0000000001s", "2419201s", " 1s", "1s "] {
            let error = refusal(
                #"{"message":{"token":"t","android":{"ttl":"\#(text)"}}}"#, sourceLocation: #_sourceLocation)
            #expect(error?.field == "message.android.ttl", "\(text)")
        }
        #expect(refusal(#"{"message":{"token":"t","android":{"ttl":3600}}}"#)?.field == "message.android.ttl")
        #expect(refusal(#"{"validate_only":"yes","message":{"token":"t"}}"#)?.field == "validate_only")
        #expect(refusal(#"{"message":{"token":"t","android":{"direct_boot_ok":1}}}"#) != nil)
    }

    @Test func errorBodiesHaveGooglesShape() throws {
        let error = try #require(refusal(#"{"message":{"token":"t","bogus":1}}"#))
        let object = try #require(try JSONSerialization.jsonObject(with: error.body) as? [String: Any])
        let body = try #require(object["error"] as? [String: Any])
        #expect(body["code"] as? Int == 400)
        #expect(body["status"] as? String == "INVALID_ARGUMENT")
        #expect(body["message"] as? String == error.message)
        let details = try #require(body["details"] as? [[String: Any]])
        #expect(details.first?["@type"] as? String == "type.googleapis.com/google.firebase.fcm.v1.FcmError")
        #expect(details.first?["errorCode"] as? String == "INVALID_ARGUMENT")
        #expect(details.contains { $0["@type"] as? String == "type.googleapis.com/google.rpc.BadRequest" })
    }
}
