//! Each HTTP provider's request body with this turn's images: where they go, as what, and
//! that the cached prefix is the same with or without them.

use base64::Engine as _;
use serde_json::Value;

use super::{anthropic, openai, ChatRequest, Image, Message, Role};

const HISTORY: [Message; 2] = [
    Message {
        role: Role::User,
        text: "Tom: hi",
    },
    Message {
        role: Role::Assistant,
        text: "hello",
    },
];

fn images() -> Vec<Image> {
    vec![
        Image {
            media_type: "image/png".into(),
            data: b"\x89PNG\r\n\x1a\n-not-really".to_vec(),
            width: 20,
            height: 10,
        },
        Image {
            media_type: "image/jpeg".into(),
            data: vec![0xFF, 0xD8, 0xFF, 0, 1, 2, 3],
            width: 4,
            height: 3,
        },
    ]
}

fn request(images: &[Image]) -> ChatRequest<'_> {
    ChatRequest {
        system: "<soul>x</soul>",
        history: &HISTORY,
        user: "<current_message>look</current_message>",
        max_tokens: 100,
        session: None,
        model: None,
        constraint: None,
        images,
    }
}

fn decoded(b64: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap()
}

#[test]
fn anthropic_sends_image_blocks_before_the_text_of_this_turn_only() {
    let imgs = images();
    let with = anthropic::request_body("m", &request(&imgs), false);
    let without = anthropic::request_body("m", &request(&[]), false);
    let turn = &with["messages"][2]["content"];
    assert_eq!(turn.as_array().unwrap().len(), 3);
    for (block, img) in turn.as_array().unwrap().iter().zip(&imgs) {
        assert_eq!(block["type"], "image");
        assert_eq!(block["source"]["type"], "base64");
        assert_eq!(block["source"]["media_type"], img.media_type.as_str());
        assert_eq!(decoded(block["source"]["data"].as_str().unwrap()), img.data);
    }
    assert_eq!(turn[2]["type"], "text");
    assert_eq!(turn[2]["text"], "<current_message>look</current_message>");
    // The cached prefix (system block, earlier messages with their breakpoint) is unchanged.
    assert_eq!(with["system"], without["system"]);
    assert_eq!(with["system"][0]["cache_control"]["type"], "ephemeral");
    assert_eq!(with["messages"][0], without["messages"][0]);
    assert_eq!(with["messages"][1], without["messages"][1]);
    assert_eq!(
        with["messages"][1]["content"][0]["cache_control"]["type"],
        "ephemeral"
    );
    assert!(without["messages"][2]["content"].is_string());
}

#[test]
fn anthropic_puts_images_in_an_unanswered_message_joined_with_this_turn() {
    let history = [
        HISTORY[0],
        HISTORY[1],
        Message {
            role: Role::User,
            text: "Tom: earlier",
        },
    ];
    let imgs = images();
    let req = ChatRequest {
        history: &history,
        ..request(&imgs)
    };
    let body = anthropic::request_body("m", &req, false);
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3, "roles still alternate");
    let turn = messages[2]["content"].as_array().unwrap();
    assert_eq!(
        (turn[0]["type"].as_str(), turn[1]["type"].as_str()),
        (Some("image"), Some("image"))
    );
    assert_eq!(
        turn[2]["text"],
        "Tom: earlier\n\n<current_message>look</current_message>"
    );
}

#[test]
fn openai_sends_data_urls_before_the_text_of_this_turn_only() {
    let imgs = images();
    let with = openai::request_body("m", &request(&imgs), false);
    let without = openai::request_body("m", &request(&[]), false);
    let turn = with["messages"][3]["content"].as_array().unwrap();
    for (part, img) in turn.iter().zip(&imgs) {
        assert_eq!(part["type"], "image_url");
        let url = part["image_url"]["url"].as_str().unwrap();
        let prefix = format!("data:{};base64,", img.media_type);
        let data = url.strip_prefix(&prefix).expect(url);
        assert_eq!(decoded(data), img.data);
    }
    assert_eq!(
        turn[2],
        serde_json::json!({"type": "text", "text": "<current_message>look</current_message>"})
    );
    // The system message and the history are the same with or without images.
    let head = |b: &Value| b["messages"].as_array().unwrap()[..3].to_vec();
    assert_eq!(head(&with), head(&without));
    assert!(without["messages"][3]["content"].is_string());
}
