// Spans of a small shop service made by Node's real OpenTelemetry SDK and sent by its real
// OTLP/HTTP exporter (protobuf), configured only by the SDK's own environment variables
// (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_HEADERS, OTEL_EXPORTER_OTLP_COMPRESSION).
//
//   node export_spans.cjs <version> <pricing.js> <failing: 0|1>
//
// 60 requests of each of three routes; with failing=1, 1 in 6 of the cart's throw from the
// service's own module (a real file, so the stack trace is Node's own). Prints the export's
// result as JSON and exits 1 when the exporter did not succeed.
"use strict";

const { SpanKind, SpanStatusCode } = require("@opentelemetry/api");
const { resourceFromAttributes } = require("@opentelemetry/resources");
const {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} = require("@opentelemetry/sdk-trace-base");
const { OTLPTraceExporter } = require("@opentelemetry/exporter-trace-otlp-proto");

const ROUTES = ["/cart/{cart_id}/total", "/products", "/health"];

async function main() {
  const [version, pricingPath, failing] = process.argv.slice(2);
  const pricing = require(pricingPath);
  const memory = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ "service.name": "shop-node", "service.version": version }),
    spanProcessors: [new SimpleSpanProcessor(memory)],
  });
  const tracer = provider.getTracer("shop.web");
  for (let n = 0; n < 60; n++) {
    for (const route of ROUTES) {
      const span = tracer.startSpan(`GET ${route}`, {
        kind: SpanKind.SERVER,
        attributes: { "http.route": route, "http.request.method": "GET" },
      });
      let status = 200;
      if (route === ROUTES[0]) {
        try {
          pricing.lineTotal(12.5, failing === "1" && n % 6 === 0 ? 0 : 2);
        } catch (error) {
          span.recordException(error);
          span.setStatus({ code: SpanStatusCode.ERROR, message: error.message });
          status = 500;
        }
      }
      span.setAttribute("http.response.status_code", status);
      span.end();
    }
  }
  await provider.forceFlush();
  const spans = memory.getFinishedSpans();
  const exporter = new OTLPTraceExporter();
  const result = await new Promise((resolve) => exporter.export(spans, resolve));
  await exporter.shutdown();
  const ok = result.code === 0; // ExportResultCode.SUCCESS
  process.stdout.write(
    JSON.stringify({ ok, spans: spans.length, error: result.error ? String(result.error) : null }),
  );
  process.exit(ok ? 0 : 1);
}

main().catch((error) => {
  process.stderr.write(String(error && error.stack ? error.stack : error));
  process.exit(2);
});
