//! `mcp-harness serve`: the governed gateway. The host's runtime (the same configuration,
//! supervised servers, pool, policy and call gate as `chat`) behind `mcp_gateway`'s fronts:
//! stdio by default (a host's configuration says `"command": "mcp-harness", "args":
//! ["serve"]`), Streamable HTTP at `/mcp` with `--http ADDR`.
//!
//! `[serve]` configures the rest, all read and checked before any server starts, so a
//! mistake is refused at once, saying which key: inbound authentication (`[serve.auth]`,
//! `--http` only), profiles (`[serve.profiles.NAME]`, served at `/mcp/NAME`), the audit log
//! (`[serve.audit]`), rate limits (`[[serve.limits]]`), the state shared with other replicas
//! (`[serve.replicas]`) and the drain (`[serve.drain]`): over HTTP, SIGTERM or SIGINT turns
//! `/readyz` to "not ready", refuses new requests after the drain's delay, lets calls in flight
//! finish within its timeout, closes the servers and exits 0; a second signal exits at once.
//!
//! Over stdio, stdout is the protocol: everything the command has to say goes to stderr.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_gateway::{
    Backend, Clock, Gateway, GatewayOptions, HttpOptions, HttpServer, Limits, Profiled, StdioOptions, SystemClock,
    serve_stdio,
};
use mcp_gateway_store::{SharedState, StartError};
use mcp_host::config::{Config, ConfigPath, Origin};
use mcp_host::serve::{HostBackend, Readiness, ServeOptions};
use mcp_protocol::Implementation;
use mcp_safety::lock;

use crate::Outcome;
use crate::output;

/// `serve`'s own arguments.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ServeArgs {
    /// Speak Streamable HTTP at http://ADDR/mcp instead of stdio (for example 127.0.0.1:8808;
    /// port 0 picks a free one). A non-loopback address needs inbound authentication
    /// ([serve.auth]).
    #[arg(long, value_name = "ADDR")]
    pub(crate) http: Option<SocketAddr>,
    /// Offer the one enabled server as it is: its tool names unchanged (no SERVER__ prefix),
    /// its capabilities and instructions mirrored. Refused unless exactly one server is enabled.
    #[arg(long)]
    pub(crate) transparent: bool,
}

/// `mcp-harness serve [--http ADDR] [--transparent]`.
pub(crate) async fn serve_command(config: Config, at: &ConfigPath, args: &ServeArgs) -> anyhow::Result<Outcome> {
    let settings = config.serve.clone();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);

    // Everything `[serve]` configures is made before any server starts: a token variable
    // that is not set, an audit log that cannot be opened or a replica store that does not
    // answer refuses the start, naming the key.
    let auth = match args.http {
        Some(_) => settings.inbound.auth.authenticator(Arc::clone(&clock))?,
        None => {
            if settings.inbound.auth.is_configured() {
                // The stdio client is whoever started us: there is no token to check.
                output::stderr("note: [serve.auth] applies to `serve --http`; a stdio client is not authenticated\n")?;
            }
            None
        }
    };
    let profiles = settings.inbound.profiles()?;
    let audit = match &settings.inbound.audit {
        Some(audit) => Some(Arc::new(audit.open()?) as Arc<dyn mcp_gateway::AuditSink>),
        None => None,
    };
    let limits = Limits::new(&settings.limits)?;
    let shared =
        SharedState::open(settings.replicas.as_ref(), limits, Arc::clone(&clock)).await.map_err(|e| match e {
            StartError::KeyFile(_) => anyhow::anyhow!("[serve.replicas] key_file: {e}"),
            e => anyhow::Error::from(e),
        })?;

    let mut ports = mcp_host::Ports::default();
    ports.events = Arc::new(crate::host::show_event);
    let mut options = ServeOptions::default();
    options.ports = ports;
    // The file the configuration was read from is watched: servers and policy follow it.
    options.reload = Some(ConfigPath::new(config.file.clone(), Origin::Flag, at.allow_workspace));
    options.transparent = args.transparent;
    // With a shared store, `/readyz` also says whether it answers: a replica that cannot reach
    // it refuses what needs it, so the load balancer should send it nothing.
    let store_watch = shared.store.is_some().then(|| watch_store(shared.clone()));
    options.readiness = store_watch.as_ref().map(|(readiness, _)| Arc::clone(readiness));
    let host = match HostBackend::start(config, options) {
        Ok(host) => host,
        Err(e) => {
            stop_watch(store_watch);
            return Err(e.into());
        }
    };
    // Profiles wrap the host: `/mcp/NAME` is served the profile's servers under the host's
    // policy narrowed by the profile's overlay; `/mcp` stays the host's own pool.
    let backend: Arc<dyn Backend> = if profiles.is_empty() {
        Arc::clone(&host) as Arc<dyn Backend>
    } else {
        Arc::new(Profiled::new(Arc::clone(&host), profiles, host.pool_options()))
    };
    let mut gateway_options = GatewayOptions {
        server_info: Implementation::new(
            settings.name.clone().unwrap_or_else(|| "mcp-harness".to_owned()),
            settings.version.clone().unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_owned()),
        ),
        instructions: settings.instructions.clone(),
        transparent: args.transparent,
        approval_ttl: settings.approval_ttl,
        approval_wait: settings.approval_wait,
        clock,
        // The audit log, and telemetry counting the decisions (when it is on).
        audit: mcp_gateway::AuditTee::join(audit, mcp_host::telemetry::policy_audit()),
        // A SERVER span per request received, when telemetry is on.
        observer: mcp_host::telemetry::serve_observer(),
        ..GatewayOptions::default()
    };
    // The sealing key, the replay cache, "yes for this client" and the limiter: in memory, or
    // shared with the other replicas.
    shared.apply(&mut gateway_options);
    let gateway = match Gateway::new(backend, gateway_options) {
        Ok(gateway) => gateway,
        Err(e) => {
            host.close().await;
            stop_watch(store_watch);
            anyhow::bail!("cannot start the gateway: {e}");
        }
    };
    let outcome = match args.http {
        None => serve_over_stdio(gateway).await,
        Some(addr) => {
            let http = HttpOptions {
                addr,
                allowed_hosts: settings.allowed_hosts.clone(),
                allowed_origins: settings.allowed_origins.clone(),
                auth,
                metrics: mcp_host::telemetry::metrics_source(),
                // With a shared store, sessions live there: any replica continues them.
                session_store: shared.store.is_some().then(|| Arc::clone(&shared.sessions)),
                metrics_addr: settings.metrics_addr,
                max_sessions: settings.max_sessions,
                max_sessions_per_caller: settings.max_sessions_per_caller,
                session_idle: settings.session_idle,
                ..HttpOptions::default()
            };
            serve_over_http(gateway, http, settings.inbound.drain.options()).await
        }
    };
    host.close().await;
    stop_watch(store_watch);
    outcome?;
    if args.http.is_some() && crate::signals::received().is_some() {
        crate::signals::mark_drained();
    }
    Ok(Outcome::Success)
}

/// How often the shared store is asked whether it answers, for `/readyz`.
const STORE_CHECK: Duration = Duration::from_secs(2);

/// A readiness check answering from what a task asking the shared store every
/// [`STORE_CHECK`] last saw (`/readyz` must not wait for the store), and that task.
fn watch_store(shared: SharedState) -> (Readiness, tokio::task::JoinHandle<()>) {
    // It answered at start (`SharedState::open` refuses a store that does not).
    let seen: Arc<Mutex<Result<(), String>>> = Arc::new(Mutex::new(Ok(())));
    let write = Arc::clone(&seen);
    let task = tokio::spawn(async move {
        loop {
            tokio::time::sleep(STORE_CHECK).await;
            let now = shared.ready().await.map_err(|e| format!("the shared store ([serve.replicas] store): {e}"));
            *lock(&write) = now;
        }
    });
    let readiness: Readiness = Arc::new(move || lock(&seen).clone());
    (readiness, task)
}

fn stop_watch(watch: Option<(Readiness, tokio::task::JoinHandle<()>)>) {
    if let Some((_, task)) = watch {
        task.abort();
    }
}

/// Over stdio: served until the client closes its end, or a signal ends it (a request in
/// flight is dropped; the caller closes the servers either way).
async fn serve_over_stdio(gateway: Gateway) -> anyhow::Result<()> {
    let (input, output, _modes) = mcp_gateway::process_stdio();
    // On a worker of its own: this command's future runs on the main thread, and the front
    // polled there would hand every request to a worker and every answer back.
    // The client is the process that started this one (or shares its placement).
    let coalesce_answers = mcp_transport::shares_one_cpu_with(std::os::unix::process::parent_id());
    let options = StdioOptions { coalesce_answers, ..StdioOptions::default() };
    let served = tokio::spawn(serve_stdio(gateway, input, output, options));
    let abort = served.abort_handle();
    match crate::signals::interruptible(served).await {
        Ok(ended) => ended.map_err(|e| anyhow::anyhow!("the stdio front stopped: {e}"))??,
        Err(interrupted) => {
            abort.abort();
            return Err(interrupted.into());
        }
    }
    Ok(())
}

/// Over HTTP: served until a signal, then drained (see the module docs).
async fn serve_over_http(
    gateway: Gateway,
    options: HttpOptions,
    drain: mcp_gateway::DrainOptions,
) -> anyhow::Result<()> {
    let server = HttpServer::bind(gateway, options).await?;
    output::stderr(&format!("listening on http://{}/mcp\n", server.local_addr()))?;
    if let Some(addr) = server.metrics_addr() {
        output::stderr(&format!("metrics on http://{addr}/metrics\n"))?;
    }
    let life = server.lifecycle();
    // The drain bounds itself (its delay, its timeout, then the grace of the cut-off answers);
    // `main` waits that long for us after the signal, unless a second signal comes.
    crate::signals::drains(drain.delay.saturating_add(drain.timeout).saturating_add(drain.grace));
    server
        .run(async move {
            let signal = crate::signals::wait().await;
            let _ = output::stderr(&format!(
                "{} received: draining (new requests refused after {:.1} s, calls in flight given {:.1} s; \
                 a second signal stops at once)\n",
                signal.name(),
                drain.delay.as_secs_f64(),
                drain.timeout.as_secs_f64()
            ));
            let report = life.drain(drain).await;
            let _ = output::stderr(&format!(
                "drained: {} request(s) were in flight, {} call(s) cut off at the timeout\n",
                report.in_flight, report.cut_off
            ));
        })
        .await;
    Ok(())
}
