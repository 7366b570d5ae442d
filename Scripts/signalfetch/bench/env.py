"""What every benchmark section runs in: the mode, the release binaries, the dev TLS material of one topology
(harness.Cluster, with no server started), and the baselines' servers (signalfetch-bench's, nginx, nghttpd)."""
import os
import resource

from .. import harness

TINY_JSON = '{"status":"ok","service":"signalfetch","version":1}'

NGINX_CONF = """worker_processes auto;
worker_rlimit_nofile {files};
pid {work}/{name}.pid;
error_log {work}/{name}-error.log;
events {{ worker_connections {connections}; }}
http {{
    access_log off;
    client_body_temp_path {work}/nginx-body;
    proxy_temp_path {work}/nginx-proxy;
    fastcgi_temp_path {work}/nginx-fastcgi;
    uwsgi_temp_path {work}/nginx-uwsgi;
    scgi_temp_path {work}/nginx-scgi;
    keepalive_requests 1000000;
    server {{
        listen 127.0.0.1:{port}{tls};
        location / {{ root {www}; default_type application/json; }}
    }}
}}
"""


class Env:
    def __init__(self, mode, out):
        self.mode = mode
        self.quick = mode == "quick"
        self.out = os.path.abspath(out)
        self.bin = harness.bin_dir()
        self.bench = os.path.join(self.bin, "signalfetch-bench")
        self.cluster = harness.Cluster(self.bin, prefix="signalfetch-bench-")
        c = self.cluster
        self.work, self.data, self.ca, self.cert, self.key = c.work, c.data, c.ca, c.cert, c.key
        self.p8, self.key_id, self.team_id = c.p8, c.key_id, c.team_id
        self.procs = c.procs
        self.www = os.path.join(self.work, "www")
        os.makedirs(self.www)
        with open(os.path.join(self.www, "status.json"), "w") as f:
            f.write(TINY_JSON)
        for path in (self.work, self.www):
            os.chmod(path, 0o755)
        os.chmod(os.path.join(self.www, "status.json"), 0o644)

    def by_mode(self, quick, full):
        return quick if self.quick else full

    def start(self, name, args, **kw):
        return self.cluster.start(name, args, **kw)

    def stop(self, proc):
        proc.stop()
        self.procs.remove(proc)

    def serve(self, kind, tls=True, extra=()):
        """A signalfetch-bench server (serve-http, serve-h2) on the port it prints."""
        args = [self.bench, kind] + (self.cluster.tls_flags if tls else []) + list(extra)
        proc = self.start(kind + str(len(self.procs)), args)
        port = proc.first_json_line()["port"]
        harness.wait_port(port, proc=proc)
        return proc, port

    def nginx(self, tls=False, connections=1024, name="nginx"):
        """nginx serving www/ on a port of its own, plain HTTP or, with `tls`, HTTPS with the topology's certificate
        and key; `connections` per worker (its open-file limit raised to fit them, within the hard limit); `name`
        tells its files and process apart from another nginx's."""
        port = harness.free_port()
        conf = os.path.join(self.work, f"{name}.conf")
        files = min(resource.getrlimit(resource.RLIMIT_NOFILE)[1], connections + 100)
        certificate = (f" ssl;\n        ssl_certificate {self.cert};\n        ssl_certificate_key {self.key}"
                       if tls else "")
        with open(conf, "w") as f:
            f.write(NGINX_CONF.format(work=self.work, port=port, www=self.www, files=files, name=name,
                                      connections=min(connections, files - 16), tls=certificate))
        proc = self.start(name, ["nginx", "-c", conf, "-p", self.work, "-g", "daemon off;"])
        harness.wait_port(port, proc=proc)
        return proc, port

    def nghttpd(self):
        port = harness.free_port()
        proc = self.start("nghttpd", ["nghttpd", "-d", self.www, str(port), self.key, self.cert])
        harness.wait_port(port, proc=proc)
        return proc, port

    def topology(self, label):
        """A fresh harness.Cluster for one measurement (closed by the caller)."""
        return harness.Cluster(self.bin, prefix=f"signalfetch-bench-{label}-")

    def close(self):
        self.cluster.close()
