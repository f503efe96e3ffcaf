//! Log output on stderr: text (ANSI colours only on a terminal) or one JSON object per line (`--log-format json`).

use std::fmt;
use std::io::IsTerminal as _;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// `--log-format`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines; coloured only when stderr is a terminal.
    #[default]
    Text,
    /// One JSON object per line: timestamp, level, target, span names, message and fields.
    Json,
}

/// Installs the global subscriber: `RUST_LOG` if set, else `default` as the filter.
pub fn init(default: &str, format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        // A log file or a pipe gets no escape sequences (kube-apiserver's klog does the same).
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).try_init(),
        LogFormat::Json => builder.with_ansi(false).event_format(Json).try_init(),
    };
}

/// The JSON event format.
pub struct Json;

/// Collects an event's fields; `message` is kept apart.
#[derive(Default)]
struct Fields {
    message: Option<String>,
    fields: Map<String, Value>,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, Value::String(format!("{value:?}")));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::String(value.to_string()));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Value::from(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, Value::from(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, Value::from(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Value::from(value));
    }
}

impl Fields {
    fn put(&mut self, field: &Field, value: Value) {
        if field.name() == "message" {
            self.message = Some(match value {
                Value::String(s) => s,
                v => v.to_string(),
            });
        } else {
            self.fields.insert(field.name().to_string(), value);
        }
    }
}

/// One log line as a JSON object (exposed for tests).
pub fn line(
    level: &str,
    target: &str,
    spans: Vec<String>,
    message: Option<String>,
    fields: Map<String, Value>,
) -> String {
    let mut o = Map::new();
    o.insert(
        "timestamp".into(),
        Value::String(k8s_openapi::jiff::Timestamp::now().to_string()),
    );
    o.insert("level".into(), Value::String(level.into()));
    o.insert("target".into(), Value::String(target.into()));
    if !spans.is_empty() {
        o.insert("spans".into(), Value::from(spans));
    }
    o.insert("message".into(), Value::String(message.unwrap_or_default()));
    if !fields.is_empty() {
        o.insert("fields".into(), Value::Object(fields));
    }
    Value::Object(o).to_string()
}

impl<S, N> FormatEvent<S, N> for Json
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut w: Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> fmt::Result {
        let mut f = Fields::default();
        event.record(&mut f);
        let spans = ctx
            .event_scope()
            .map(|scope| scope.from_root().map(|s| s.name().to_string()).collect())
            .unwrap_or_default();
        let meta = event.metadata();
        writeln!(
            w,
            "{}",
            line(meta.level().as_str(), meta.target(), spans, f.message, f.fields)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_one_json_object() {
        let mut fields = Map::new();
        fields.insert("pods".into(), Value::from(3));
        let l = line(
            "INFO",
            "insitu_controller::run",
            vec!["reconcile".into()],
            Some("synced".into()),
            fields,
        );
        assert!(!l.contains('\n') && !l.contains('\x1b'));
        let v: Value = serde_json::from_str(&l).unwrap();
        assert_eq!(v["level"], "INFO");
        assert_eq!(v["message"], "synced");
        assert_eq!(v["fields"]["pods"], 3);
        assert_eq!(v["spans"][0], "reconcile");
    }
}
