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
    run_cut(h, req, usize::MAX)
}

/// [`run`], with `Host::generate_cut` before step `cut_at` (a server's time limit).
fn run_cut(h: &mut Host, req: &GenerateRequest, cut_at: usize) -> (GenerateResult, Vec<Streamed>) {
    h.generate_begin(req, 0.0).unwrap();
    while !h.prefill_chunk().unwrap().done {}
    let mut out: Vec<Streamed> = Vec::new();
    for step in 0..10_000 {
        if step == cut_at {
            h.generate_cut().unwrap();
        }
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

/// A cut (the server's time limit) ends the running choice with "length", keeping exactly what
/// it generated so far, and every later choice unrun, empty, with "length": the events still
/// open and close each of the `n` choices, and usage counts only the tokens generated.
#[test]
fn a_cut_ends_the_running_choice_and_the_rest_unrun_with_length() {
    let n = 4;
    let req = GenerateRequest { max_tokens: Some(40), ..request(n, 9, 1.0) };
    let (full, _) = run(&mut host(), &req);
    let full = full.choices.unwrap();
    // Cut two steps into choice 1 (the steps before it: choice 0's, then the step that starts
    // choice 1 also samples its first token).
    let before = full[0].ids.len().max(1);
    for cut_at in [0, 3, before + 2] {
        let mut h = host();
        let (r, streamed) = run_cut(&mut h, &req, cut_at);
        let choices = r.choices.clone().unwrap();
        assert_eq!((choices.len(), streamed.len()), (n, n), "cut at {cut_at}");
        let ran = usize::from(cut_at > before);
        for (i, c) in choices.iter().enumerate() {
            assert_eq!(c.index, i);
            assert_eq!((streamed[i].text.as_str(), &streamed[i].tokens, streamed[i].finish), (c.text.as_str(), &c.ids, Some(c.finish_reason)), "cut at {cut_at}, choice {i}: events and result agree");
            assert_eq!(streamed[i].logprobs, c.logprobs.as_ref().unwrap().len());
            if i < ran {
                assert_eq!((&c.text, &c.ids, c.finish_reason), (&full[i].text, &full[i].ids, full[i].finish_reason), "a choice finished before the cut is whole");
            } else if i == ran {
                // What it generated before the cut, a prefix of the uncut run's (same seed).
                assert!(full[i].ids.starts_with(&c.ids) && c.ids.len() < full[i].ids.len(), "cut at {cut_at}: {:?} of {:?}", c.ids, full[i].ids);
                assert!(full[i].text.starts_with(&c.text));
                assert_eq!(c.finish_reason, "length");
            } else {
                assert_eq!((c.text.as_str(), c.ids.len(), c.finish_reason), ("", 0, "length"), "cut at {cut_at}: choice {i} never ran");
            }
        }
        assert_eq!(r.completion_tokens, choices.iter().map(|c| c.ids.len()).sum::<usize>());
        // The host serves the next request as if nothing had been cut.
        let (again, _) = run(&mut h, &req);
        assert_eq!(again.choices.unwrap(), full);
    }
}
