//! Redis values to Ruby values and Ruby command arguments to bytes.

use magnus::rb_sys::{AsRawValue, FromRawValue};
use magnus::{prelude::*, Error, Float, Integer, IntoValue, RString, Ruby, Symbol, Value};
use redis::Value as RedisValue;

pub fn to_ruby(ruby: &Ruby, v: RedisValue) -> Result<Value, Error> {
    Ok(match v {
        RedisValue::Nil => ruby.qnil().as_value(),
        RedisValue::Int(i) => ruby.integer_from_i64(i).as_value(),
        RedisValue::BulkString(b) => bytes_to_string(ruby, &b).as_value(),
        RedisValue::SimpleString(s) => ruby.str_new(&s).as_value(),
        RedisValue::Okay => ruby.str_new("OK").as_value(),
        RedisValue::Double(d) => ruby.float_from_f64(d).as_value(),
        RedisValue::Boolean(b) => b.into_value_with(ruby),
        RedisValue::Array(items) | RedisValue::Set(items) => {
            let ary = ruby.ary_new_capa(items.len());
            for item in items {
                ary.push(to_ruby(ruby, item)?)?;
            }
            ary.as_value()
        }
        RedisValue::Map(pairs) => {
            let hash = ruby.hash_new();
            for (k, v) in pairs {
                hash.aset(to_ruby(ruby, k)?, to_ruby(ruby, v)?)?;
            }
            hash.as_value()
        }
        other => ruby.str_new(&format!("{other:?}")).as_value(),
    })
}

fn bytes_to_string(ruby: &Ruby, b: &[u8]) -> RString {
    if std::str::from_utf8(b).is_ok() {
        ruby.enc_str_new(b, ruby.utf8_encoding())
    } else {
        ruby.str_from_slice(b)
    }
}

/// An Integer's decimal digits, read without calling a Ruby method. Not magnus's `to_string`: it
/// formats through Integer#to_s under `rb_protect`, so an exception pending for the thread
/// (Thread#raise, Timeout, Thread#kill) lands in that method call, is swallowed, and magnus falls
/// back to `rb_any_to_s`: Redis was sent `#<Integer:0x…>` (`PX 5000` answered "value is not an
/// integer", an ECHO of 123456789 came back as `#<Integer:0x000000000eb79a2b>`) and the
/// exception was lost. Found by bin/chaos --gc (chaos/gc_stress.rb).
fn integer_digits(i: Integer) -> Vec<u8> {
    if let Ok(n) = i.to_i64() {
        return n.to_string().into_bytes();
    }
    // SAFETY: `i` is a live Bignum and the GVL is held; rb_big2str is C code that calls no Ruby
    // method and checks no interrupt. The bytes are copied before any Ruby code can run.
    unsafe {
        let digits = Value::from_raw(rb_sys::rb_big2str(i.as_raw(), 10));
        RString::from_value(digits)
            .map(|s| s.as_slice().to_vec())
            .unwrap_or_default()
    }
}

/// A command argument: String, Symbol, Integer or Float.
pub fn to_arg(ruby: &Ruby, v: Value) -> Result<Vec<u8>, Error> {
    if let Some(s) = RString::from_value(v) {
        // SAFETY: the bytes are copied before any Ruby code can run.
        return Ok(unsafe { s.as_slice() }.to_vec());
    }
    if let Some(s) = Symbol::from_value(v) {
        return Ok(s.name()?.as_bytes().to_vec());
    }
    if let Some(i) = Integer::from_value(v) {
        return Ok(integer_digits(i));
    }
    if let Some(f) = Float::from_value(v) {
        return Ok(f.to_f64().to_string().into_bytes());
    }
    Err(Error::new(
        ruby.exception_type_error(),
        format!(
            "command arguments must be String, Symbol, Integer or Float, got {}",
            unsafe { v.classname() }
        ),
    ))
}
