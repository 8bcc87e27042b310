#!/usr/bin/env python3
"""Write tests/data/tok_corpus.json: the strings every tokenizer fixture is checked on.

Hand-written cases by category, plus seeded random mixes of characters from many scripts.
The output is deterministic; regenerate fixtures (gen_expected.mjs) after changing it.

    python3 tools/tokenizer/make_corpus.py
"""
import json
import pathlib
import random

ROOT = pathlib.Path(__file__).resolve().parents[2]

PROSE = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "It was late in the evening when the train finally pulled into the station.",
    "She said, \"We'll see about that,\" and walked away.",
    "I can't believe it's already December; where did the year go?",
    "They're going to the market, aren't they?",
    "You've got mail. He'd rather not. We'll manage. I'm fine. She's here.",
    "DON'T SHOUT! IT'S RUDE, ISN'T IT? WE'RE TRYING TO SLEEP.",
    "A tokenizer splits text into pieces that a language model can read.",
    "Memory bandwidth, not arithmetic, bounds the speed of decoding on most laptops.",
    "In 1969, two astronauts walked on the Moon while a third orbited above.",
    "The recipe calls for 2 cups of flour, 1.5 teaspoons of salt, and 3 eggs.",
    "Please reply by Friday, 14 March, at the latest.",
    "Wait... what? No -- that can't be right!",
    "Mr. Smith met Dr. Jones at 10 a.m. on Jan. 3rd.",
    "e.g., i.e., etc., vs. and cf. are common abbreviations.",
    "First line\nSecond line\nThird line",
    "Paragraph one.\n\nParagraph two follows a blank line.\n\n\nAnd three newlines here.",
    "Tabs\tseparate\tthese\twords.",
    "Windows line endings\r\nlook like this\r\n",
    "The weather today is mild, with a light breeze from the west and no rain expected.",
    "Small models can run entirely inside a browser tab without sending data anywhere.",
    "Why did the chicken cross the road? To get to the other side.",
    "antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis",
    "CamelCaseIdentifiersAreCommon and snake_case_ones_too and kebab-case-as-well",
    "UPPERCASE lowercase MiXeD cAsE",
    "word" * 12,
    "a b c d e f g h i j k l m n o p q r s t u v w x y z",
    "Lorem-like filler: alpha beta gamma delta epsilon zeta eta theta iota kappa.",
    "He paused. Then, quietly: 'Are you sure?'",
    "“Curly quotes” and ‘single ones’ — with an em dash – and an en dash.",
    "Ellipsis… and bullet • points ◦ here",
    "rock 'n' roll, ' quoted ', 'tis, y'all, o'clock",
    "It 's spaced oddly , isn 't it ? Yes .",
]

WHITESPACE = []
for ws in [" ", "  ", "   ", "    ", "        ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n", " \n", "\n ",
           " \t ", "\u00a0", "\u3000", "\u2009", " \u00a0 "]:
    WHITESPACE += [ws, ws + "x", "x" + ws, "x" + ws + "y", ws + "x" + ws]
WHITESPACE += [
    " " * 31, " " * 32, " " * 40, "\t" * 31, "\t" * 33, "\n" * 31, "\n" * 40,
    "  leading two", "trailing two  ", "   both sides   ", "\n\nleading newlines",
    "trailing newlines\n\n", "mixed \t \n whitespace \n\t everywhere",
    "indented:\n    four spaces\n\ttab\n        eight spaces",
]

NUMBERS = [
    "0", "7", "42", "123", "1234", "12345", "123456", "1234567", "3.14159", "2.718281828459045",
    "1,000,000", "1 000 000", "-17", "+3", "1e10", "6.022e23", "0x1F", "0b1011", "007",
    "3/4", "50%", "$19.99", "€20", "£5", "¥1000", "10:45", "2024-07-26", "192.168.0.1",
    "12345678901234567890123456789012345678901234567890",
    "phone: +1 (555) 010-9999", "v1.2.3-beta.4", "½ ¼ ¾", "²³¹", "٣٤٥ ۱۲۳ १२३ 一二三",
    "1st 2nd 3rd 4th", "COVID-19", "A4 B12 C300",
]

PUNCT = [
    "!", "?", "!!!", "???", "?!?!", "...", "..........", "---", "___", "***", "###", "~~~",
    "!@#$%^&*()_+-=[]{}|;':\",./<>?`~", "<<>>", "(((nested)))", "[[link]]", "{{template}}",
    "\\\\server\\share", "a//b", "»«", "¿Qué?", "¡Hola!", "。、！？", "…", "‽", "§¶†‡",
    "`code`", "``", "```", "'''", "\"\"\"", "--flag", "=>", "->", "::", "!=", "==", "<=", ">=",
]

CODE = [
    "fn main() {\n    println!(\"Hello, world!\");\n}\n",
    "def add(a, b):\n    return a + b\n\nprint(add(2, 3))",
    "const x = [1, 2, 3].map((n) => n * 2);\nconsole.log(x);",
    "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); return 0; }",
    "SELECT name, COUNT(*) FROM users WHERE age >= 18 GROUP BY name ORDER BY 2 DESC;",
    "<div class=\"box\"><p>Hello</p></div>",
    "<table><tr><td>1</td><td>2</td></tr></table>",
    "{\"key\": \"value\", \"list\": [1, 2.5, null, true], \"nested\": {\"a\": {}}}",
    "for i in $(seq 1 10); do echo \"$i\"; done | grep -v 5 > out.txt 2>&1",
    "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hi\")\n}\n",
    "    if (x && !y || z) { return; }",
    "let v: Vec<Option<&'static str>> = vec![Some(\"a\"), None];",
    "x += 1; y -= 2; z *= 3; w /= 4; q %= 5; r **= 2",
    "class Foo(Bar):\n\t\"\"\"Docstring.\"\"\"\n\tdef __init__(self):\n\t\tsuper().__init__()",
    "import numpy as np\narr = np.zeros((3, 4), dtype=np.float32)",
    "// comment\n/* block\n   comment */\n# hash comment\n-- sql comment",
    "a = b ? c : d;",
    "matrix[i][j] = matrix[i - 1][j - 1] + 1",
    "@decorator\nasync def handler(req: Request) -> Response: ...",
    "ls -la ~/projects && cd .. && git status",
    "\t\tindented with tabs\n\t\t\tdeeper",
    "      spaces before code()",
]

URLS = [
    "https://example.com/path/to/page?query=1&other=two#section",
    "http://localhost:8080/v1/chat/completions",
    "ftp://files.example.org/pub/README.txt",
    "mailto:someone@example.com",
    "user.name+tag@sub.example.co.uk",
    "www.example.com",
    "C:\\Users\\Public\\Documents\\file.txt",
    "/usr/local/bin/edgellm --model models/x.gguf",
    "file:///home/user/notes.md",
    "https://en.wikipedia.org/wiki/Tokenization_(lexical_analysis)",
]

EMOJI = [
    "😀", "😀😃😄", "👍", "👍🏽", "👋🏿 hi", "❤️", "❤", "🇺🇸", "🇯🇵🇫🇷", "🏳️‍🌈",
    "👨‍👩‍👧‍👦", "👩🏽‍💻", "🧑‍🤝‍🧑", "1️⃣ 2️⃣ #️⃣", "☕ ☃ ☂", "I ❤️ tokenizers 🤖!",
    "🎉🎉🎉 party", "emoji at end 🚀", "🐍 and 🦀 and 🐹", "✅ done ❌ failed ⚠️ warning",
    "🫠🫡🫶", "👁️‍🗨️", "🏴󠁧󠁢󠁳󠁣󠁴󠁿",
]

SCRIPTS = [
    "你好，世界！", "我们今天去公园散步，天气很好。", "机器学习是人工智能的一个分支。",
    "こんにちは、世界。", "日本語の文章をトークン化します。カタカナとひらがな。",
    "안녕하세요 세계", "한국어 문장도 잘 처리되어야 합니다.",
    "مرحبا بالعالم", "اللغة العربية تكتب من اليمين إلى اليسار.",
    "नमस्ते दुनिया", "हिन्दी में एक वाक्य।",
    "Привет, мир!", "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "Γειά σου Κόσμε", "שלום עולם", "สวัสดีชาวโลก", "Xin chào thế giới",
    "Ça va? Où est la bibliothèque? Déjà vu, naïve café.", "Straße, Größe, Fußgänger, ÄÖÜ äöü",
    "Español: ñandú, pingüino, acción", "Português: coração, não, ação", "Polski: żółć, źdźbło, łąka",
    "Čeština: příliš žluťoučký kůň", "Türkçe: İstanbul, ığdır, şeker", "Română: știință, țară",
    "Íslenska: þorn, ð", "Tiếng Việt có dấu: ắ ằ ẳ ẵ ặ", "e\u0301 vs é (combining vs precomposed)",
    "mixed: English 中文 日本語 한국어 العربية हिन्दी",
    "ﬁ ﬂ ligatures and Ｆｕｌｌｗｉｄｔｈ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕞𝕒𝕥𝕙 𝒮𝒸𝓇𝒾𝓅𝓉",
    "አማርኛ ጽሑፍ", "ქართული ენა", "Հայերեն լեզու", "ภาษาไทยไม่มีช่องว่าง",
]

SPECIAL = [
    "<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n",
    "<bos>", "<eos>", "<pad>", "<unk>", "<mask>", "<bos><bos>", "<eos>text<eos>",
    "<start_of_turn>", "<end_of_turn>", "<start_of_turn", "start_of_turn>", "<<start_of_turn>>",
    "[multimodal]", "<start_of_image>", "<end_of_image>", "[multimodal]<start_of_image>",
    "<unused0>", "<unused99>", "</s>", "<s>", "text</s>", "<table><tr><td>x</td></tr></table>",
    "<h1>Title</h1><strong>bold</strong><em>it</em>",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n",
    "<|endoftext|>", "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
    "[INST] hello [/INST]", "<tool_call>{\"name\": \"f\"}</tool_call>",
    " <start_of_turn> spaced <end_of_turn> ", "a<bos>b", "<start_of_turn><end_of_turn>",
]

SHORT = [
    "", " ", "a", "Z", "1", ".", "'", "\"", "<", ">", "\n", "\t", "\r", "é", "ß", "中", "あ", "한",
    "😀", "▁", "▁▁", "▁hello", "\u200b", "\ufeff", "\u00ad", "\x00", "\x1b[31mred\x1b[0m", "\x7f",
    "\U0010ffff", "\ufffd", "\u2028", "\u0085",
]

EDGE = [
    "'s", "'S", "'ll", "'LL", "'re", "'ve", "'m", "'d", "'t", "x's y'S z'Ll",
    "it's", "IT'S", "o'clock", "''", "'''hello'''", "a'b'c'd",
    "hello\n\n\nworld", "\n\nhello", "hello\n\n", " hello", "hello ", "  hello  ",
    "ab" * 40, "The The The The The", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "zzzzzzzzzzzzzzzzzzzzzzzzzz", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "\u00a0nbsp\u00a0inside\u00a0", "zero\u200bwidth\u200bspace", "soft\u00adhyphen",
    "line\u2028separator", "tab\tand\u3000ideographic space",
    "A\u0300\u0301\u0302 stacked marks", "Z̴̡̛͓̈́a̶̗͐l̷̰̾g̸͈̈o̵̱͘",
]

POOLS = [
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "0123456789",
    " \t\n  ",
    ".,;:!?'\"()[]{}<>-_=+*/\\|@#$%^&~`",
    "àéîõüçñßøåæœ",
    "你好世界中文字符学习",
    "こんにちはカタカナ",
    "안녕하세요한국어",
    "مرحباعربي",
    "नमस्तेहिन्दी",
    "приветмир",
    "😀👍🏽❤️🇺🇸🤖🎉",
    "▁",
]


def random_strings(n, seed=20240726):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        length = rng.randint(1, 40)
        s = []
        while len(s) < length:
            pool = rng.choice(POOLS)
            run = rng.randint(1, 6)
            s.extend(rng.choice(pool) for _ in range(run))
        out.append("".join(s))
    return out


def main():
    corpus = []
    for group in (PROSE, WHITESPACE, NUMBERS, PUNCT, CODE, URLS, EMOJI, SCRIPTS, SPECIAL, SHORT, EDGE):
        corpus.extend(group)
    corpus.extend(random_strings(120))
    # Deduplicate, keeping order.
    seen = set()
    corpus = [s for s in corpus if not (s in seen or seen.add(s))]
    path = ROOT / "tests/data/tok_corpus.json"
    path.write_text(json.dumps(corpus, ensure_ascii=True, indent=0) + "\n")
    print(f"wrote {path.relative_to(ROOT)}: {len(corpus)} strings")


if __name__ == "__main__":
    main()
