"""Checks KVScope's fixed chat formats against real chat templates (run by
scripts/check-chat-templates.sh). The templates are llama.cpp's collection of real models' Jinja
chat templates (models/templates/*.jinja in the llama-cpp-python sdist, pinned as
check_tokenizers.py pins it). Each one is rendered with jinja2 as transformers'
apply_chat_template renders it (sandboxed, trim_blocks and lstrip_blocks, loop controls,
raise_exception, strftime_now, transformers' tojson and {% generation %}; tools and documents
None) for a user message and the generation prompt, and `kvscope tokenize --chat --json` is asked for the same message with that template
beside a tokenizer: the family KVScope detects and the text it writes. Per template:
  PASS  KVScope writes exactly the template's text (a BOS the template writes is its token's text,
        which the tokenizer reads as that token; a fixed family that opens with BOS has the
        tokenizer add it); the line says "template" where KVScope rendered the template, else the
        fixed family it used
  NONE  neither jinja2 nor KVScope renders it for one user message (a tool-use template without
        tools, one that needs a variable apply_chat_template does not pass): --chat refuses it
  MISS  jinja2 renders it, KVScope refuses it (its Jinja subset lacks something; the reason shown)
  FAIL  KVScope writes a prompt the template does not
Several messages are tried (surrounding white space, a line break, non-ASCII text). Exit status 1
when any template FAILs (a MISS is reported, not failed)."""
import argparse
import datetime
import glob
import json
import os
import subprocess
import sys
import tarfile
import tempfile

import jinja2
import jinja2.ext
import jinja2.sandbox

PACKAGE = ("llama-cpp-python", "0.3.36")  # as check_tokenizers.py pins it
MESSAGES = ["Hello there, how are you?", "  Tell me a story.\n", "Was ist ein KV-Cache? \u00e9\u4e2d\u6587"]
BOS, EOS = "<s>", "</s>"  # stories260K-hf's, which KVScope gives templates as bos_token and eos_token


def fetch_templates(packages, folder):
    """The .jinja files of the pinned llama-cpp-python sdist, extracted into `folder`."""
    name, version = PACKAGE
    stem = name.replace("-", "_") + "-" + version
    archive = os.path.join(packages, stem + ".tar.gz")
    if not os.path.exists(archive):
        os.makedirs(packages, exist_ok=True)
        print(f"check-chat-templates: downloading {name}=={version} from PyPI", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                        "--no-deps", "--no-binary", ":all:", "-d", packages, f"{name}=={version}"],
                       check=True, stdout=sys.stderr)
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if "/models/templates/" in m.name and m.name.endswith(".jinja")]
        for m in members:
            m.name = os.path.basename(m.name)
            tar.extract(m, folder, filter="data")
    return sorted(glob.glob(os.path.join(folder, "*.jinja")))


class Generation(jinja2.ext.Extension):
    """transformers' {% generation %} ... {% endgeneration %}: marks the assistant's text, renders it."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller):
        return caller()


def environment():
    """A jinja2 environment set up as transformers renders chat templates."""
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                       extensions=[jinja2.ext.loopcontrols, Generation])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
    return env


def kvscope_chat(kvscope, folder, template, message):
    """(chat, text, bos_added) from `kvscope tokenize --chat --json` ("template" or the family);
    (None, reason, None) where --chat is refused (exit status 2, "--chat: ..." said)."""
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"chat_template": template}, f)
    run = subprocess.run([kvscope, "tokenize", "--tokenizer", folder, "--chat", "--json", "--text", message],
                         capture_output=True, text=True)
    if run.returncode == 2 and "--chat" in run.stderr:
        return None, run.stderr.strip(), None
    if run.returncode != 0:
        raise RuntimeError(f"kvscope tokenize exited with {run.returncode}: {run.stderr.strip()}")
    out = json.loads(run.stdout.splitlines()[0])
    return out["chat"], out["text"], out["bos_added"]


def check(kvscope, folder, env, path):
    """(status, detail) of one template."""
    template = open(path, encoding="utf-8").read()
    for message in MESSAGES:
        family, text, bos_added = kvscope_chat(kvscope, folder, template, message)
        try:
            want = env.from_string(template).render(messages=[{"role": "user", "content": message}], tools=None,
                                                    documents=None, add_generation_prompt=True, bos_token=BOS,
                                                    eos_token=EOS)
        except (jinja2.exceptions.TemplateError, TypeError) as e:
            if family is None:
                return "NONE", f"jinja2: {e}"
            return "FAIL", f"{family}: jinja2 cannot render it ({e}), KVScope writes a prompt for it"
        if family is None:
            return "MISS", text
        # A fixed family that opens with BOS has the tokenizer add it rather than write its text.
        if family != "template" and bos_added and want.startswith(BOS):
            want = want[len(BOS):]
        if text != want:
            return "FAIL", f"{family}: message {message!r}: KVScope {text!r}, template {want!r}"
    return "PASS", family


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kvscope", required=True)
    ap.add_argument("--packages", required=True, help="folder of the pinned PyPI packages (shared with check-tokenizers)")
    ap.add_argument("--tokenizer", required=True, help="a tokenizer.json that adds BOS (stories260K-hf's)")
    ap.add_argument("names", nargs="*", help="only templates whose file name contains one of these")
    args = ap.parse_args()
    env = environment()
    counts = {"PASS": 0, "NONE": 0, "MISS": 0, "FAIL": 0}
    with tempfile.TemporaryDirectory() as work:
        templates = fetch_templates(args.packages, os.path.join(work, "templates"))
        folder = os.path.join(work, "tokenizer")
        os.makedirs(folder)
        with open(args.tokenizer, "rb") as src, open(os.path.join(folder, "tokenizer.json"), "wb") as dst:
            dst.write(src.read())
        for path in templates:
            name = os.path.basename(path)
            if args.names and not any(n in name for n in args.names):
                continue
            status, detail = check(args.kvscope, folder, env, path)
            counts[status] += 1
            print(f"{status:4}  {name}" + (f"  ({detail})" if detail else ""), flush=True)
    print(f"check-chat-templates: {counts['PASS']} pass, {counts['NONE']} that neither renders, "
          f"{counts['MISS']} that only jinja2 renders, {counts['FAIL']} fail")
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
