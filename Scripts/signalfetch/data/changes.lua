-- wrk's sync: GET /v1/changes?since=PROFILE_SINCE with the access token SCALE_TOKEN, one new message each.
wrk.method = "GET"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("SCALE_TOKEN")
wrk.path = "/v1/changes?since=" .. os.getenv("PROFILE_SINCE")
