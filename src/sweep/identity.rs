//! Trial identity: a stable hash of everything that determines a trial's result.
//!
//! Hashed: the compatibility level, the elaborated step graph's fingerprint (wiring, shapes,
//! parameters — not comments or spacing), the model's parameter values, the task and its
//! options (an option added to the task after trials were recorded only when it is off its
//! default, `TaskKind::in_identity`), for a task that reads data files a hash of what it
//! read (`Task::data_digest`: an edited file makes other trials), the training settings
//! (except those that change how a trial runs, not what it computes: the device and
//! checkpointing), and the seed. Same identity ⇒ same data and initial weights; a sweep skips
//! trials whose identity is already `done`.

use sha2::{Digest, Sha256};

use crate::check::Trial;

/// Bumped when a memctl change makes earlier results incomparable (so they re-run).
pub const COMPAT_LEVEL: u32 = 1;

pub fn trial_key(trial: &Trial) -> String {
    let mut train = serde_json::to_value(&trial.config.train).unwrap_or_default();
    if let Some(settings) = train.as_object_mut() {
        for name in crate::train_config::NOT_IN_IDENTITY.iter().filter(|n| **n != "device") {
            settings.remove(*name);
        }
        // Earlier identities hashed the device as "" (kept, so that they stay the same).
        settings.insert("device".into(), "".into());
    }
    let kind = crate::tasks::get(&trial.config.task);
    let task_options: std::collections::BTreeMap<&String, &crate::value::Value> = (trial.config.task_options.iter())
        .filter(|(name, value)| kind.is_none_or(|k| k.in_identity(name, value)))
        .collect();
    let mut canonical = serde_json::json!({
        "compat": COMPAT_LEVEL,
        "graph": trial.graph.fingerprint(),
        "model": trial.config.model,
        "params": trial.config.params,
        "task": trial.config.task,
        "task_options": task_options,
        "train": train,
        "seed": trial.config.seed,
    });
    if let (Some(data), Some(fields)) = (trial.task.data_digest(), canonical.as_object_mut()) {
        fields.insert("data".into(), data.into());
    }
    let digest = Sha256::digest(canonical.to_string().as_bytes());
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small Learning to Execute spec, every task option at its default but the mode.
    const SPEC: &str = concat!(
        r#"
task lte = learnToExecute(mode = "copy", length = 3, validation = 10, test = 10)

"#,
        crate::check::test_specs::tiny_lstm!("tiny", "d"),
        r#"
experiment e {
  task lte
  model tiny
  train { optimizer = adam(lr = 1e-2), batch = 4, steps = 2 }
}
"#
    );

    fn key_of(spec: &str) -> String {
        trial_key(&crate::check::checked_text(spec).experiments[0].trials[0])
    }

    #[test]
    fn an_option_added_to_a_task_keeps_the_identity_of_the_trials_recorded_before_it() {
        // The identity of this trial before learnToExecute had the options `grammar` and
        // `level_batches`.
        assert_eq!(key_of(SPEC), "da5819a86ddea104");
        let with = |options: &str| key_of(&SPEC.replace("test = 10", &format!("test = 10, {options}")));
        assert_eq!(with("grammar = \"zaremba\", level_batches = 1000"), "da5819a86ddea104", "written at the defaults");
        assert_ne!(with("grammar = \"sonnet\""), "da5819a86ddea104", "another grammar, another trial");
        assert_ne!(with("level_batches = 10"), "da5819a86ddea104");
        assert_ne!(with("curriculum = \"combine\""), "da5819a86ddea104", "an option hashed at every value");
    }

    /// A task that reads data files: its trials' identity follows what the files hold, not
    /// only their path (an edited file, another trial); the same text, the same trial.
    #[test]
    fn a_trial_on_an_edited_data_file_is_another_trial() {
        let dir = tempfile::tempdir().unwrap();
        let (jsonl, corpus, babi) = (dir.path().join("d.jsonl"), dir.path().join("c.txt"), dir.path().join("babi"));
        std::fs::create_dir(&babi).unwrap();
        let examples = |n: u32| -> String {
            (0..20).map(|i| format!("{{\"input\": [{}, 1], \"target\": [{}]}}\n", i % 5, (i + n) % 3)).collect()
        };
        let story = |who: &str| format!("1 {who} went to the kitchen.\n2 Where is {who}?\tkitchen\t1\n");
        let write_babi = |who: &str| {
            for split in ["train", "valid", "test"] {
                std::fs::write(babi.join(format!("qa1_{split}.txt")), story(who)).unwrap();
            }
        };
        let key = |task: &str| {
            key_of(&SPEC.replace("learnToExecute(mode = \"copy\", length = 3, validation = 10, test = 10)", task))
        };
        let tasks = [
            format!("jsonl(path = \"{}\", valid = 0.2, test = 0.2)", jsonl.display()),
            format!("corpus(path = \"{}\", length = 3)", corpus.display()),
            format!("babi(path = \"{}\", task = 1)", babi.display()),
        ];
        std::fs::write(&jsonl, examples(0)).unwrap();
        std::fs::write(&corpus, "the cat sat on the mat and the dog sat on the log").unwrap();
        write_babi("Mary");
        let before: Vec<String> = tasks.iter().map(|t| key(t)).collect();
        assert_eq!(tasks.iter().map(|t| key(t)).collect::<Vec<_>>(), before, "the same files, the same trials");
        std::fs::write(&jsonl, examples(1)).unwrap();
        std::fs::write(&corpus, "the cat sat on the mat and the dog sat on the rug").unwrap();
        write_babi("John");
        for (t, was) in tasks.iter().zip(&before) {
            assert_ne!(&key(t), was, "{t}: an edited file");
        }
    }

    #[test]
    fn the_geometry_tasks_labels_keep_the_identity_of_the_trials_recorded_before_them() {
        let spec = SPEC
            .replace(
                "learnToExecute(mode = \"copy\", length = 3, validation = 10, test = 10)",
                "tsp(points = 6, validation = 10, test = 10)",
            )
            .replace("step token", "step x")
            .replace("embed(token, 8)", "x");
        // The identity of this trial before `tsp` had the option `labels`.
        assert_eq!(key_of(&spec), "08098a9001d4488b");
        let code = spec.replace("test = 10)", "test = 10, labels = \"code\")");
        assert_ne!(key_of(&code), "08098a9001d4488b", "the authors' labels, another trial");
    }
}
