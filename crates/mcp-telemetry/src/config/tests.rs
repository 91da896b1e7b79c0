use super::*;

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

fn resolve(table: &TelemetrySettings, pairs: &[(&str, &str)]) -> Result<TelemetryConfig, ConfigError> {
    TelemetryConfig::resolve(table, &env(pairs), "mcp-harness")
}

fn table(toml_text: &str) -> TelemetrySettings {
    #[derive(Deserialize)]
    struct Doc {
        telemetry: TelemetrySettings,
    }
    toml::from_str::<Doc>(toml_text).unwrap().telemetry
}

#[test]
fn nothing_configured_exports_nothing() {
    let c = resolve(&TelemetrySettings::default(), &[]).unwrap();
    assert!(c.exports_nothing());
    assert_eq!(c.service_name(), "mcp-harness");
    assert_eq!(c.sampler, Sampler::ParentBasedAlwaysOn);
    assert!(!c.capture_tool_content);
}

#[test]
fn the_common_endpoint_gets_each_signals_path_for_http_and_is_kept_for_grpc() {
    let c = resolve(&TelemetrySettings::default(), &[(OTEL_EXPORTER_OTLP_ENDPOINT, "http://127.0.0.1:4318/base/")])
        .unwrap();
    assert_eq!(c.traces.as_ref().unwrap().endpoint, "http://127.0.0.1:4318/base/v1/traces");
    assert_eq!(c.metrics.as_ref().unwrap().endpoint, "http://127.0.0.1:4318/base/v1/metrics");
    assert_eq!(c.traces.as_ref().unwrap().protocol, Protocol::HttpProtobuf);
    assert_eq!(c.traces.as_ref().unwrap().timeout, DEFAULT_TIMEOUT);

    let c = resolve(
        &TelemetrySettings::default(),
        &[(OTEL_EXPORTER_OTLP_ENDPOINT, "http://127.0.0.1:4317"), (OTEL_EXPORTER_OTLP_PROTOCOL, "grpc")],
    )
    .unwrap();
    assert_eq!(c.traces.as_ref().unwrap().endpoint, "http://127.0.0.1:4317/");
    assert_eq!(c.traces.as_ref().unwrap().protocol, Protocol::Grpc);
}

#[test]
fn a_signals_own_endpoint_and_protocol_win_and_are_used_as_written() {
    let c = resolve(
        &TelemetrySettings::default(),
        &[
            (OTEL_EXPORTER_OTLP_ENDPOINT, "http://127.0.0.1:4318"),
            (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, "http://127.0.0.1:9999/custom"),
            (OTEL_EXPORTER_OTLP_METRICS_PROTOCOL, "grpc"),
            (OTEL_EXPORTER_OTLP_METRICS_ENDPOINT, "http://127.0.0.1:4317"),
        ],
    )
    .unwrap();
    assert_eq!(c.traces.unwrap().endpoint, "http://127.0.0.1:9999/custom");
    let m = c.metrics.unwrap();
    assert_eq!((m.endpoint.as_str(), m.protocol), ("http://127.0.0.1:4317/", Protocol::Grpc));
}

/// Compression: a signal's variable over the common one, the environment over the table, the
/// signal's key over the table's; none by default.
#[test]
fn compression_is_resolved_signal_first_and_the_environment_over_the_table() {
    let endpoint = (OTEL_EXPORTER_OTLP_ENDPOINT, "http://127.0.0.1:4318");
    let of = |c: TelemetryConfig| (c.traces.unwrap().compression, c.metrics.unwrap().compression);
    let none = TelemetrySettings::default();
    assert_eq!(of(resolve(&none, &[endpoint]).unwrap()), (Compression::None, Compression::None));
    let both = resolve(&none, &[endpoint, (OTEL_EXPORTER_OTLP_COMPRESSION, "gzip")]).unwrap();
    assert_eq!(of(both), (Compression::Gzip, Compression::Gzip));
    let pairs = [endpoint, (OTEL_EXPORTER_OTLP_COMPRESSION, "GZIP"), (OTEL_EXPORTER_OTLP_TRACES_COMPRESSION, "none")];
    assert_eq!(of(resolve(&none, &pairs).unwrap()), (Compression::None, Compression::Gzip));
    let t = table(
        "[telemetry]\nendpoint = \"http://127.0.0.1:4318\"\ncompression = \"gzip\"\n[telemetry.metrics]\ncompression = \"none\"\n",
    );
    assert_eq!(of(resolve(&t, &[]).unwrap()), (Compression::Gzip, Compression::None));
    assert_eq!(
        of(resolve(&t, &[(OTEL_EXPORTER_OTLP_COMPRESSION, "none")]).unwrap()),
        (Compression::None, Compression::None)
    );
    let bad = table("[telemetry]\nendpoint = \"http://127.0.0.1:4318\"\n[telemetry.traces]\ncompression = \"br\"\n");
    let said = resolve(&bad, &[]).unwrap_err().to_string();
    assert!(said.starts_with("telemetry.traces.compression") && said.contains("gzip or none"), "{said}");
}

#[test]
fn only_traces_when_metrics_say_none_and_an_explicit_otlp_uses_the_local_default() {
    let c = resolve(&TelemetrySettings::default(), &[(OTEL_TRACES_EXPORTER, "otlp"), (OTEL_METRICS_EXPORTER, "none")])
        .unwrap();
    assert_eq!(c.traces.unwrap().endpoint, "http://localhost:4318/v1/traces");
    assert!(c.metrics.is_none());
}

#[test]
fn sdk_disabled_wins_over_everything() {
    let t = table("[telemetry]\nendpoint = \"http://127.0.0.1:4318\"\n");
    let c =
        resolve(&t, &[(OTEL_SDK_DISABLED, "true"), (OTEL_EXPORTER_OTLP_ENDPOINT, "http://127.0.0.1:4318")]).unwrap();
    assert!(c.exports_nothing());
    let c = resolve(&table("[telemetry]\nenabled = false\nendpoint = \"http://127.0.0.1:4318\"\n"), &[]).unwrap();
    assert!(c.exports_nothing());
    // The variable set to false re-enables what the table turned off: the environment wins.
    let c = resolve(
        &table("[telemetry]\nenabled = false\nendpoint = \"http://127.0.0.1:4318\"\n"),
        &[(OTEL_SDK_DISABLED, "FALSE")],
    )
    .unwrap();
    assert!(c.traces.is_some());
}

#[test]
fn the_table_is_read_and_the_environment_overrides_it_key_by_key() {
    let t = table(
        r#"
        [telemetry]
        endpoint = "http://127.0.0.1:4318"
        protocol = "http/protobuf"
        headers = { Authorization = "Bearer t0k" }
        timeout_ms = 2500
        service_name = "agent"
        resource_attributes = { "deployment.environment.name" = "dev", team = "a" }
        sampler = "traceidratio"
        sampler_arg = 0.5
        capture_tool_content = true
        metric_export_interval_ms = 1000

        [telemetry.metrics]
        enabled = false
        "#,
    );
    let c = resolve(&t, &[]).unwrap();
    let traces = c.traces.clone().unwrap();
    assert_eq!(traces.endpoint, "http://127.0.0.1:4318/v1/traces");
    assert_eq!(traces.timeout, Duration::from_millis(2500));
    assert_eq!(traces.headers, vec![("authorization".to_owned(), Secret::new("Bearer t0k"))]);
    assert!(c.metrics.is_none());
    assert_eq!(c.sampler, Sampler::TraceIdRatio(0.5));
    assert!(c.capture_tool_content);
    assert_eq!(c.metric_interval, Duration::from_millis(1000));
    assert_eq!(
        c.resource,
        vec![
            ("service.name".to_owned(), "agent".to_owned()),
            ("deployment.environment.name".to_owned(), "dev".to_owned()),
            ("team".to_owned(), "a".to_owned()),
        ]
    );
    // Debug never shows a header's value.
    assert!(!format!("{c:?}").contains("t0k"));

    let c = resolve(
        &t,
        &[
            (OTEL_SERVICE_NAME, "from-env"),
            (OTEL_RESOURCE_ATTRIBUTES, "team=b,note=a%2Cb"),
            (OTEL_TRACES_SAMPLER, "always_off"),
            (OTEL_EXPORTER_OTLP_HEADERS, "authorization=Bearer%20env"),
            (OTEL_EXPORTER_OTLP_TIMEOUT, "100"),
        ],
    )
    .unwrap();
    assert_eq!(c.service_name(), "from-env");
    assert!(c.resource.contains(&("team".to_owned(), "b".to_owned())));
    assert!(c.resource.contains(&("note".to_owned(), "a,b".to_owned())));
    assert_eq!(c.sampler, Sampler::AlwaysOff);
    let traces = c.traces.unwrap();
    assert_eq!(traces.headers, vec![("authorization".to_owned(), Secret::new("Bearer env"))]);
    assert_eq!(traces.timeout, Duration::from_millis(100));
}

#[test]
fn samplers_by_their_standard_names() {
    let cases = [
        ("always_on", None, Sampler::AlwaysOn),
        ("always_off", None, Sampler::AlwaysOff),
        ("traceidratio", Some("0.25"), Sampler::TraceIdRatio(0.25)),
        ("traceidratio", None, Sampler::TraceIdRatio(1.0)),
        ("parentbased_always_on", None, Sampler::ParentBasedAlwaysOn),
        ("parentbased_always_off", None, Sampler::ParentBasedAlwaysOff),
        ("parentbased_traceidratio", Some("0"), Sampler::ParentBasedTraceIdRatio(0.0)),
    ];
    for (name, arg, want) in cases {
        let mut pairs = vec![(OTEL_TRACES_SAMPLER, name)];
        if let Some(arg) = arg {
            pairs.push((OTEL_TRACES_SAMPLER_ARG, arg));
        }
        assert_eq!(resolve(&TelemetrySettings::default(), &pairs).unwrap().sampler, want, "{name}");
    }
}

/// (the variables set, the name the error must give, a part of what it must say is accepted)
type BadCase<'a> = (&'a [(&'a str, &'a str)], &'a str, &'a str);

#[test]
fn bad_values_are_errors_that_name_the_variable_and_say_what_is_accepted() {
    let cases: &[BadCase<'_>] = &[
        (&[(OTEL_SDK_DISABLED, "yes")], OTEL_SDK_DISABLED, "true or false"),
        (
            &[(OTEL_EXPORTER_OTLP_PROTOCOL, "http/json"), (OTEL_EXPORTER_OTLP_ENDPOINT, "http://h:1")],
            OTEL_EXPORTER_OTLP_PROTOCOL,
            "http/json is not supported",
        ),
        (
            &[(OTEL_EXPORTER_OTLP_PROTOCOL, "udp"), (OTEL_EXPORTER_OTLP_ENDPOINT, "http://h:1")],
            OTEL_EXPORTER_OTLP_PROTOCOL,
            "http/protobuf or grpc",
        ),
        (&[(OTEL_EXPORTER_OTLP_ENDPOINT, "localhost:4318")], OTEL_EXPORTER_OTLP_ENDPOINT, "http:// or https://"),
        (&[(OTEL_EXPORTER_OTLP_ENDPOINT, "ftp://h/")], OTEL_EXPORTER_OTLP_ENDPOINT, "http:// or https://"),
        (
            &[(OTEL_EXPORTER_OTLP_ENDPOINT, "https://h:4317"), (OTEL_EXPORTER_OTLP_PROTOCOL, "grpc")],
            OTEL_EXPORTER_OTLP_ENDPOINT,
            "no TLS for gRPC",
        ),
        (&[(OTEL_TRACES_SAMPLER, "jaeger_remote")], OTEL_TRACES_SAMPLER, "parentbased_traceidratio"),
        (&[(OTEL_TRACES_SAMPLER_ARG, "2")], OTEL_TRACES_SAMPLER_ARG, "ratio from 0 to 1"),
        (&[(OTEL_TRACES_SAMPLER_ARG, "half")], OTEL_TRACES_SAMPLER_ARG, "ratio from 0 to 1"),
        (&[(OTEL_TRACES_EXPORTER, "zipkin")], OTEL_TRACES_EXPORTER, "otlp or none"),
        (
            &[(OTEL_EXPORTER_OTLP_COMPRESSION, "gz"), (OTEL_EXPORTER_OTLP_ENDPOINT, "http://h:1")],
            OTEL_EXPORTER_OTLP_COMPRESSION,
            "gzip or none",
        ),
        (
            &[(OTEL_EXPORTER_OTLP_METRICS_COMPRESSION, "zstd"), (OTEL_EXPORTER_OTLP_ENDPOINT, "http://h:1")],
            OTEL_EXPORTER_OTLP_METRICS_COMPRESSION,
            "zstd is not supported",
        ),
        (
            &[(OTEL_EXPORTER_OTLP_TIMEOUT, "10s"), (OTEL_EXPORTER_OTLP_ENDPOINT, "http://h:1")],
            OTEL_EXPORTER_OTLP_TIMEOUT,
            "milliseconds",
        ),
        (&[(OTEL_RESOURCE_ATTRIBUTES, "novalue")], OTEL_RESOURCE_ATTRIBUTES, "key=value"),
        (&[(OTEL_RESOURCE_ATTRIBUTES, "k=%FF")], OTEL_RESOURCE_ATTRIBUTES, "UTF-8"),
        (&[(OTEL_METRIC_EXPORT_INTERVAL, "0")], OTEL_METRIC_EXPORT_INTERVAL, "above 0"),
        (&[(OTEL_BSP_MAX_QUEUE_SIZE, "100000000000")], OTEL_BSP_MAX_QUEUE_SIZE, "up to 65536"),
        (&[(OTEL_BSP_MAX_EXPORT_BATCH_SIZE, "many")], OTEL_BSP_MAX_EXPORT_BATCH_SIZE, "up to 65536"),
    ];
    for (pairs, name, expected) in cases {
        let err = resolve(&TelemetrySettings::default(), pairs).unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with(name) && text.contains(expected), "{pairs:?}: {text}");
    }
}

#[test]
fn header_values_never_reach_an_error() {
    let err = resolve(
        &TelemetrySettings::default(),
        &[(OTEL_EXPORTER_OTLP_ENDPOINT, "http://h:1"), (OTEL_EXPORTER_OTLP_HEADERS, "authorization Bearer s3cret")],
    )
    .unwrap_err();
    assert!(!err.to_string().contains("s3cret"), "{err}");
    // A value no header can carry is refused (the exporter dropped it silently), not shown.
    let err = resolve(
        &TelemetrySettings::default(),
        &[
            (OTEL_EXPORTER_OTLP_ENDPOINT, "http://h:1"),
            (OTEL_EXPORTER_OTLP_HEADERS, "authorization=s3cret%0d%0aX-Inj:%201"),
        ],
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("authorization") && err.contains("printable ASCII") && !err.contains("s3cret"), "{err}");
}

/// Credentials in a collector's URL (user info, query) reach neither an error nor a debug print.
#[test]
fn credentials_in_an_endpoint_are_hidden_where_it_is_shown() {
    let err = resolve(&TelemetrySettings::default(), &[(OTEL_EXPORTER_OTLP_ENDPOINT, "ftp://u:s3cret@h/?key=k3y")])
        .unwrap_err()
        .to_string();
    assert!(!err.contains("s3cret") && !err.contains("k3y") && err.contains("ftp://"), "{err}");
    let config =
        resolve(&TelemetrySettings::default(), &[(OTEL_EXPORTER_OTLP_ENDPOINT, "http://u:s3cret@h:1/?key=k3y")])
            .unwrap();
    let target = config.traces.unwrap();
    assert!(target.endpoint.contains("s3cret"), "the exporter still gets the URL whole");
    for shown in [format!("{target:?}"), target.shown_endpoint()] {
        assert!(!shown.contains("s3cret") && !shown.contains("k3y") && shown.contains("h:1"), "{shown}");
    }
}

#[test]
fn unknown_table_keys_and_wrong_types_are_refused_by_name() {
    #[derive(Debug, Deserialize)]
    struct Doc {
        #[allow(dead_code)]
        telemetry: TelemetrySettings,
    }
    let err = toml::from_str::<Doc>("[telemetry]\nendpont = \"http://h:1\"\n").unwrap_err().to_string();
    assert!(err.contains("endpont") && err.contains("endpoint"), "{err}");
    let err = toml::from_str::<Doc>("[telemetry.traces]\nsampler = \"always_on\"\n").unwrap_err().to_string();
    assert!(err.contains("sampler"), "{err}");
    let err = toml::from_str::<Doc>("[telemetry]\ntimeout_ms = \"fast\"\n").unwrap_err().to_string();
    assert!(err.contains("timeout_ms") || err.contains("integer"), "{err}");
}

#[test]
fn a_table_value_that_cannot_be_used_names_its_key() {
    let err = resolve(&table("[telemetry]\nendpoint = \"nope\"\n"), &[]).unwrap_err().to_string();
    assert!(err.starts_with("telemetry.endpoint"), "{err}");
    let err = resolve(&table("[telemetry.traces]\nendpoint = \"http://h:1\"\nprotocol = \"thrift\"\n"), &[])
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("telemetry.traces.protocol"), "{err}");
    let err = resolve(&table("[telemetry]\nsampler_arg = 1.5\n"), &[]).unwrap_err().to_string();
    assert!(err.starts_with("telemetry.sampler_arg"), "{err}");
}
