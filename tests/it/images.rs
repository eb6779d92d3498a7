//! Images through the real provider clients: a PNG fitted to each provider's limits reaches
//! the fake Anthropic and the fake OpenAI-compatible server as an image of its media type,
//! size and dimensions; a server that refuses images says so, and is sent none from then on.

use std::time::Duration;

use anima::config::secret::Secret;
use anima::llm::anthropic::Anthropic;
use anima::llm::image::prepare;
use anima::llm::openai::OpenAi;
use anima::llm::{ChatRequest, Image, LlmError, Provider};

use crate::support::images::SeenImage;
use crate::support::{wait, FakeModel, Script};

/// A PNG of `w` × `h`: bands of colour, as a screenshot has (a few rows repeated: quick to
/// make in a debug build).
fn png(w: u32, h: u32) -> Vec<u8> {
    let rows: Vec<Vec<u8>> = (0..8u32)
        .map(|y| {
            (0..w)
                .flat_map(|x| [(x / 7) as u8, (y * 30) as u8, (x / 3) as u8])
                .collect()
        })
        .collect();
    let mut data = Vec::with_capacity((w * h * 3) as usize);
    for y in 0..h {
        data.extend_from_slice(&rows[(y / 16 % 8) as usize]);
    }
    let mut out = Vec::new();
    let mut e = png::Encoder::new(&mut out, w, h);
    e.set_color(png::ColorType::Rgb);
    e.set_depth(png::BitDepth::Eight);
    let mut wr = e.write_header().unwrap();
    wr.write_image_data(&data).unwrap();
    wr.finish().unwrap();
    out
}

fn turn(images: &[Image]) -> ChatRequest<'_> {
    ChatRequest {
        system: "<soul>Wren</soul>",
        history: &[],
        user: "<current_message>what is this?</current_message>",
        max_tokens: 100,
        session: None,
        model: None,
        constraint: None,
        images,
    }
}

fn seen(img: &Image) -> SeenImage {
    SeenImage {
        media_type: img.media_type.clone(),
        bytes: img.data.len(),
        width: img.width,
        height: img.height,
        sniffed: Some("image/png"),
    }
}

fn providers(model: &FakeModel) -> Vec<Box<dyn Provider>> {
    anima::tls::install();
    let t = Duration::from_secs(10);
    vec![
        Box::new(Anthropic::new(&model.url(), Secret::new("k"), "m", false, t).unwrap()),
        Box::new(OpenAi::new(&format!("{}/v1", model.url()), None, "m", false, t).unwrap()),
    ]
}

#[test]
fn a_png_reaches_each_provider_as_an_image_of_its_type_and_size() {
    let source = png(1600, 800);
    // Anthropic's long edge is 1,568 pixels; a local OpenAI-compatible server's 1,024.
    for (i, (w, h)) in [(1568, 784), (1024, 512)].into_iter().enumerate() {
        let model = FakeModel::start();
        let provider = providers(&model).remove(i);
        let limits = provider.image_limits().expect("reads images");
        let img = prepare(&source, &limits).unwrap();
        assert_eq!(
            (img.media_type.as_str(), img.width, img.height),
            ("image/png", w, h)
        );
        let answer = wait(provider.complete(turn(std::slice::from_ref(&img)), None)).unwrap();
        assert!(answer.text.contains("Default reply"), "{}", provider.name());
        assert_eq!(model.images(), vec![seen(&img)], "{}", provider.name());
        // The turn's text still reads as it did.
        let rec = &model.requests()[0];
        assert!(rec.turn_text().contains("what is this?"));
        assert_eq!(rec.images().len(), 1);
    }
}

#[test]
fn a_small_png_reaches_the_model_as_it_was_shared() {
    let source = png(300, 200);
    let model = FakeModel::start();
    for provider in providers(&model) {
        let img = prepare(&source, &provider.image_limits().unwrap()).unwrap();
        assert_eq!(img.data, source, "passed through untouched");
        wait(provider.complete(turn(std::slice::from_ref(&img)), None)).unwrap();
    }
    let want = SeenImage {
        media_type: "image/png".into(),
        bytes: source.len(),
        width: 300,
        height: 200,
        sniffed: Some("image/png"),
    };
    assert_eq!(model.images(), vec![want.clone(), want]);
}

#[test]
fn a_server_that_refuses_images_says_so_and_is_sent_none_from_then_on() {
    let model = FakeModel::start();
    model.push(Script::Status(
        500,
        vec![],
        r#"{"error":{"code":500,"message":"image input is not supported - hint: if this is unexpected, you may need to provide the mmproj","type":"server_error"}}"#.into(),
    ));
    let provider = providers(&model).remove(1);
    let img = prepare(&png(64, 64), &provider.image_limits().unwrap()).unwrap();
    let refused = wait(provider.complete(turn(std::slice::from_ref(&img)), None)).unwrap_err();
    assert!(
        matches!(&refused, LlmError::ImagesRefused { message, .. } if message.contains("HTTP 500") && message.contains("mmproj")),
        "{refused:?}"
    );
    assert!(!refused.is_retryable());
    assert_eq!(
        model.requests().len(),
        1,
        "not asked again behind the caller's back"
    );
    assert_eq!(provider.image_limits(), None, "none offered from then on");
    // A turn that read its images before the refusal is told at once, nothing sent.
    let again = wait(provider.complete(turn(std::slice::from_ref(&img)), None)).unwrap_err();
    assert!(matches!(again, LlmError::ImagesRefused { .. }), "{again:?}");
    assert_eq!(model.requests().len(), 1);
    let answer = wait(provider.complete(turn(&[]), None)).unwrap();
    assert!(answer.text.contains("Default reply"));
    assert_eq!(model.requests()[1].images().len(), 0);
}
