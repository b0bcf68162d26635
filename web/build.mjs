// Builds the remat-judge front-end into server/web/static/dist/:
//   app.js          one minified ES2019 bundle of src/app.js (CodeMirror 6 + KaTeX)
//   katex.min.css   KaTeX's stylesheet, copied verbatim
//   fonts/          KaTeX's fonts, so the CSS's relative `fonts/...` URLs resolve
// The output is deterministic: no timestamps, no source maps, no hashes that depend on the
// machine. Paths are relative to this file, so `npm run build` works from any directory.
import { build } from "esbuild";
import { copyFile, mkdir, readdir, rm, stat } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";

const here = dirname(fileURLToPath(import.meta.url));
const outDir = join(here, "..", "server", "web", "static", "dist");
const require = createRequire(import.meta.url);
const katexDist = join(dirname(require.resolve("katex/package.json")), "dist");

async function main() {
  // Start from an empty output folder so stale files never linger.
  await rm(outDir, { recursive: true, force: true });
  await mkdir(join(outDir, "fonts"), { recursive: true });

  const result = await build({
    absWorkingDir: here,
    entryPoints: [join(here, "src", "app.js")],
    outfile: join(outDir, "app.js"),
    bundle: true,
    format: "iife",
    platform: "browser",
    target: "es2019",
    minify: true,
    sourcemap: false,
    legalComments: "none",
    charset: "utf8",
    metafile: true,
    logLevel: "warning",
    define: { "process.env.NODE_ENV": '"production"' },
  });

  await copyFile(join(katexDist, "katex.min.css"), join(outDir, "katex.min.css"));
  const fonts = (await readdir(join(katexDist, "fonts"))).sort();
  for (const name of fonts) {
    await copyFile(join(katexDist, "fonts", name), join(outDir, "fonts", name));
  }

  const size = (await stat(join(outDir, "app.js"))).size;
  const inputs = Object.keys(result.metafile.inputs).length;
  console.log(
    `built ${join(outDir, "app.js")} (${(size / 1024).toFixed(1)} KiB from ${inputs} modules), ` +
      `katex.min.css and ${fonts.length} font files`,
  );
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
