/** Text safe inside HTML content and double-quoted attributes. */
function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** The dashboard's one page: scripts come from this server only (see dashboard-server.ts). */
export function dashboardHtml(runName: string, metricsFile: string): string {
  const name = escapeHtml(runName);
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>kiln: ${name}</title>
<style>
  html, body { margin: 0; height: 100%; font-family: "DejaVu Sans", "Liberation Sans", Arial, Helvetica, sans-serif; }
  body { display: flex; flex-direction: column; }
  header { padding: 8px 16px; border-bottom: 1px solid #ddd; display: flex; gap: 24px; align-items: baseline; }
  header h1 { font-size: 16px; margin: 0; }
  #status { color: #444; font-size: 14px; }
  #chart { flex: 1; min-height: 600px; }
</style>
<script src="/vendor/echarts.min.js"></script>
<script type="module" src="/dashboard/page.js"></script>
</head>
<body data-run="${name}">
<header><h1>${name}</h1><span title="${escapeHtml(metricsFile)}" id="status" data-points="0">connecting…</span></header>
<div id="chart"></div>
</body>
</html>
`;
}
