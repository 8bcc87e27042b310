//! OpenAI's `n` through the host (`host/choices.rs`) on the tiny synthetic models: each choice
//! is exactly the plain request run with that choice's seed, the step events say which choice
//! they belong to and end once, and the result holds every choice with usage covering them all.

mod common;

use edgellm::host::{GenerateRequest, GenerateResult, Host};

fn host() -> Host {
    common::load_host(&common::data("tiny_llama.gguf"))
}

fn request(n: usize, seed: u64, temperature: f32) -> GenerateRequest {
    GenerateRequest {
        kind: Some("completion".into()),
        prompt: Some("hello world".into()),
        max_tokens: Some(12),
        temperature: Some(temperature),
        top_k: Some(0),
        top_p: Some(1.0),
        min_p: Some(0.0),
        seed: Some(seed),
        logprobs: Some(2),
        n: Some(n),
        ..Default::default()
    }
}

/// One choice as the step events streamed it.
#[derive(Debug, Default, PartialEq)]
struct Streamed {
    text: String,
    tokens: Vec<u32>,
    logprobs: usize,
    finish: Option<&'static str>,
}

/// Runs `req` as the hosts do (prefill, then steps until `done`); returns the result and what
/// the events carried, per choice.
fn run(h: &mut Host, req: &GenerateRequest) -> (GenerateResult, Vec<Streamed>) {
    h.generate_begin(req, 0.0).unwrap();
    while !h.prefill_chunk().unwrap().done {}
    let mut out: Vec<Streamed> = Vec::new();
    for _ in 0..10_000 {
        let ev = h.decode_step().unwrap();
        assert!(ev.choice == out.len() || ev.choice + 1 == out.len(), "choices come in order: {} after {}", ev.choice, out.len());
        if ev.choice == out.len() {
            out.push(Streamed::default());
        }
        let s = out.last_mut().unwrap();
        assert!(s.finish.is_none(), "a choice's steps end with its finish");
        s.text.push_str(&ev.text);
        s.tokens.extend(ev.token);
        s.logprobs += ev.logprobs.len();
        s.finish = ev.choice_finish_reason;
        assert_eq!(ev.choice_finish_reason.is_some(), ev.finish_reason.is_some());
        if ev.done {
            assert!(ev.finish_reason.is_some(), "done comes with the last choice's finish");
            break;
        }
    }
    (h.generate_end(1.0).unwrap(), out)
}

#[test]
fn each_choice_is_the_plain_request_with_its_seed() {
    let mut h = host();
    let n = 4;
    let (r, streamed) = run(&mut h, &request(n, 42, 1.5));
    let choices = r.choices.clone().expect("n > 1 lists the choices");
    assert_eq!((choices.len(), streamed.len()), (n, n));
    for (i, c) in choices.iter().enumerate() {
        assert_eq!(c.index, i);
        // The same choice from a plain request with the choice's seed (on a fresh host, and on
        // this one, whose cache now holds the last choice).
        let plain = GenerateRequest { n: None, seed: Some(GenerateRequest::choice_seed(42, i)), ..request(1, 0, 1.5) };
        for h in [&mut host(), &mut h] {
            let (p, _) = run(h, &plain);
            assert_eq!((&p.text, &p.ids, p.finish_reason), (&c.text, &c.ids, c.finish_reason), "choice {i}");
            assert_eq!(p.logprobs.as_ref(), c.logprobs.as_ref(), "choice {i}");
            assert!(p.choices.is_none(), "n: 1 has no choices list");
        }
        let s = &streamed[i];
        assert_eq!((&s.text, s.finish, s.logprobs), (&c.text, Some(c.finish_reason), c.logprobs.as_ref().unwrap().len()), "choice {i} as streamed");
        assert_eq!(s.tokens, c.ids, "choice {i}'s tokens, each from one step");
    }
    let distinct: std::collections::BTreeSet<&Vec<u32>> = choices.iter().map(|c| &c.ids).collect();
    assert!(distinct.len() > 1, "sampled choices differ: {choices:?}");
    // The first choice is also the result's own fields; usage covers every choice.
    assert_eq!((&r.text, &r.ids, r.finish_reason), (&choices[0].text, &choices[0].ids, choices[0].finish_reason));
    assert_eq!(r.completion_tokens, choices.iter().map(|c| c.ids.len()).sum::<usize>());
    assert_eq!(r.prompt_tokens, run(&mut host(), &request(1, 42, 1.5)).0.prompt_tokens, "the prompt counts once");
    let steps = r.head.screened_steps + r.head.full_steps;
    assert!(steps >= r.completion_tokens - n, "every choice's decode steps: {steps} for {} tokens", r.completion_tokens);
    // The same seed repeats every choice.
    let (again, _) = run(&mut h, &request(n, 42, 1.5));
    assert_eq!(again.choices, r.choices);
}

#[test]
fn greedy_choices_are_identical_and_later_ones_reuse_the_prompt() {
    let mut h = host();
    let (r, streamed) = run(&mut h, &request(3, 1, 0.0));
    let choices = r.choices.unwrap();
    assert!(choices.iter().all(|c| c.ids == choices[0].ids && c.text == choices[0].text));
    assert_eq!(streamed.len(), 3);
    // The request's prompt figures are the first choice's (a later one finds the prompt in the
    // cache and runs only its last token again).
    assert_eq!(r.cached_tokens, 0, "the request's cached tokens are the first choice's");
}

#[test]
fn n_is_bounded_and_one_is_the_plain_request() {
    let mut h = host();
    let e = h.generate_begin(&GenerateRequest { n: Some(edgellm::protocol::MAX_CHOICES + 1), ..request(1, 0, 0.0) }, 0.0).unwrap_err();
    assert_eq!((e.code.as_str(), e.param.as_deref()), ("INVALID_REQUEST", Some("n")));
    let (one, s) = run(&mut h, &request(1, 9, 1.0));
    let (none, _) = run(&mut host(), &GenerateRequest { n: None, ..request(1, 9, 1.0) });
    assert_eq!((one.ids, one.choices, s.len()), (none.ids, None, 1));
}
