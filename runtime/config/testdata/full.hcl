# A weir daemon configuration using every setting.
log_level = "debug"
log_format = "json"
memory_limit = "2GiB"

sandbox {
  workers       = 3
  spare_workers = 1
  memory        = "256MiB"
  timeout       = "10s"
}

engine {
  workers          = 8
  spare_workers    = 2
  max_queued       = 500
  queue_timeout    = "2m"
  budget_in_flight = 1000
  run_budget       = 50
  lease_timeout    = "20s"
  max_attempts     = 3
  retry_base       = "200ms"
  retry_max        = "1m"
}

drain {
  grace = "45s"
}

socket {
  mode  = "0660"
  group = "0"
}

tcp {
  address = "127.0.0.1:7411"
  token "alice" {
    secret = "alice-0123456789abcdef"
  }
  token "ci-bot" {
    secret_file = "ci.token"
  }
}

metrics {
  address = "127.0.0.1:9411"
}

retention {
  max_age = "30d"
}

plugin "http" {
  allow_hosts = ["api.example.com", "example.org"]
  timeout     = "10s"
  max_bytes   = 1048576
}

disk {
  min_free = "1GiB"
}

http {
  read_header_timeout = "5s"
  read_timeout        = "30s"
  write_timeout       = "45s"
  idle_timeout        = "90s"
  max_conns           = 256
  max_conns_per_peer  = 16
}

plugin_ping {
  interval = "10s"
  timeout  = "4s"
}

telemetry {
  otlp_endpoint = "collector.example:4317"
  protocol      = "grpc"
  insecure      = true
  headers       = { "X-Team" = "weir" }
  sample        = 0.5
  service_name  = "weir-full"
  capture_content = true
}
