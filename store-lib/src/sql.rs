//! The one way store code talks to its database, whichever backend holds it: statements in
//! the SQL both SQLite and PostgreSQL accept, with `$1`-style parameters, run through [`Sql`]
//! with [`Value`] parameters, and rows read back as [`Row`]s of values. The SQLite side is
//! here; the PostgreSQL side is in `postgres`.

use std::borrow::Cow;

use rusqlite::types::{ToSqlOutput, ValueRef};

use super::StoreError;

/// A parameter or a column value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Bool(bool),
}

impl From<i64> for Value {
    fn from(n: i64) -> Self {
        Self::Int(n)
    }
}

impl From<u32> for Value {
    fn from(n: u32) -> Self {
        Self::Int(i64::from(n))
    }
}

impl From<u16> for Value {
    fn from(n: u16) -> Self {
        Self::Int(i64::from(n))
    }
}

impl From<u8> for Value {
    fn from(n: u8) -> Self {
        Self::Int(i64::from(n))
    }
}

impl From<f64> for Value {
    fn from(n: f64) -> Self {
        Self::Real(n)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Self::Bool(b)
    }
}

impl From<&str> for Value {
    fn from(text: &str) -> Self {
        Self::Text(text.to_owned())
    }
}

impl From<&String> for Value {
    fn from(text: &String) -> Self {
        Self::Text(text.clone())
    }
}

impl From<String> for Value {
    fn from(text: String) -> Self {
        Self::Text(text)
    }
}

impl From<&Option<String>> for Value {
    fn from(text: &Option<String>) -> Self {
        text.as_deref().into()
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(value: Option<T>) -> Self {
        value.map_or(Self::Null, Into::into)
    }
}

/// Parameters from a list of anything that converts to a [`Value`].
macro_rules! params {
    ($($value:expr),* $(,)?) => {
        &[$($crate::sql::Value::from($value)),*][..]
    };
}
pub(crate) use params;

/// One row of a result.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Row(pub(crate) Vec<Value>);

impl Row {
    fn at(&self, index: usize) -> Result<&Value, StoreError> {
        self.0
            .get(index)
            .ok_or_else(|| StoreError::Corrupt(format!("no column {index} in a result")))
    }

    fn mismatch(&self, index: usize, wanted: &str) -> StoreError {
        StoreError::Corrupt(format!(
            "column {index} is {:?}, not {wanted}",
            self.0.get(index)
        ))
    }

    /// An integer, or `None` for NULL.
    pub(crate) fn opt_i64(&self, index: usize) -> Result<Option<i64>, StoreError> {
        match self.at(index)? {
            Value::Null => Ok(None),
            Value::Int(n) => Ok(Some(*n)),
            Value::Bool(b) => Ok(Some(i64::from(*b))),
            _ => Err(self.mismatch(index, "an integer")),
        }
    }

    /// An integer.
    pub(crate) fn i64(&self, index: usize) -> Result<i64, StoreError> {
        self.opt_i64(index)?
            .ok_or_else(|| self.mismatch(index, "an integer"))
    }

    /// A `COUNT`/`SUM` as an unsigned count (a `NULL` sum of no rows is 0).
    pub(crate) fn count(&self, index: usize) -> Result<u64, StoreError> {
        Ok(self
            .opt_i64(index)?
            .map_or(0, |n| u64::try_from(n).unwrap_or(0)))
    }

    /// A real number, or `None` for NULL (an integer reads as one too).
    pub(crate) fn opt_f64(&self, index: usize) -> Result<Option<f64>, StoreError> {
        match self.at(index)? {
            Value::Null => Ok(None),
            Value::Real(n) => Ok(Some(*n)),
            #[allow(clippy::cast_precision_loss)]
            Value::Int(n) => Ok(Some(*n as f64)),
            _ => Err(self.mismatch(index, "a number")),
        }
    }

    /// A truth value (SQLite has integers, PostgreSQL booleans).
    pub(crate) fn bool(&self, index: usize) -> Result<bool, StoreError> {
        Ok(self.i64(index)? != 0)
    }

    /// Text, or `None` for NULL.
    pub(crate) fn opt_text(&self, index: usize) -> Result<Option<String>, StoreError> {
        match self.at(index)? {
            Value::Null => Ok(None),
            Value::Text(text) => Ok(Some(text.clone())),
            _ => Err(self.mismatch(index, "text")),
        }
    }

    /// Text.
    pub(crate) fn text(&self, index: usize) -> Result<String, StoreError> {
        self.opt_text(index)?
            .ok_or_else(|| self.mismatch(index, "text"))
    }

    /// Text by reference (for long JSON values).
    pub(crate) fn text_ref(&self, index: usize) -> Result<&str, StoreError> {
        match self.at(index)? {
            Value::Text(text) => Ok(text),
            _ => Err(self.mismatch(index, "text")),
        }
    }
}

/// Runs statements on one backend, inside the transaction the store opened.
pub(crate) trait Sql {
    /// Runs a statement; returns how many rows it changed.
    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64, StoreError>;

    /// Runs several statements with no parameters (a migration).
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    fn batch(&mut self, sql: &str) -> Result<(), StoreError>;

    /// Runs a query; returns every row.
    fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Row>, StoreError>;

    /// Runs a query and hands its rows to `each` one at a time, without holding them all.
    fn for_each(
        &mut self,
        sql: &str,
        params: &[Value],
        each: &mut dyn FnMut(Row) -> Result<(), StoreError>,
    ) -> Result<(), StoreError>;

    /// The first row of a query, if any.
    fn query_opt(&mut self, sql: &str, params: &[Value]) -> Result<Option<Row>, StoreError> {
        Ok(self.query(sql, params)?.into_iter().next())
    }

    /// The one row of a query.
    fn query_one(&mut self, sql: &str, params: &[Value]) -> Result<Row, StoreError> {
        self.query_opt(sql, params)?
            .ok_or_else(|| StoreError::Corrupt(format!("no row from {sql}")))
    }
}

/// A statement written with `$1` parameters, as SQLite numbers them (`?1`).
fn sqlite_text(sql: &str) -> Cow<'_, str> {
    if !sql.contains('$') {
        return Cow::Borrowed(sql);
    }
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '$' && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push('?');
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Self::Null => ToSqlOutput::Borrowed(ValueRef::Null),
            Self::Int(n) => ToSqlOutput::Borrowed(ValueRef::Integer(*n)),
            Self::Real(n) => ToSqlOutput::Borrowed(ValueRef::Real(*n)),
            Self::Text(text) => ToSqlOutput::Borrowed(ValueRef::Text(text.as_bytes())),
            Self::Bool(b) => ToSqlOutput::Borrowed(ValueRef::Integer(i64::from(*b))),
        })
    }
}

fn sqlite_row(row: &rusqlite::Row<'_>, columns: usize) -> rusqlite::Result<Row> {
    (0..columns)
        .map(|i| {
            Ok(match row.get_ref(i)? {
                ValueRef::Null => Value::Null,
                ValueRef::Integer(n) => Value::Int(n),
                ValueRef::Real(n) => Value::Real(n),
                ValueRef::Text(text) => Value::Text(String::from_utf8_lossy(text).into_owned()),
                ValueRef::Blob(blob) => Value::Text(String::from_utf8_lossy(blob).into_owned()),
            })
        })
        .collect::<rusqlite::Result<_>>()
        .map(Row)
}

/// The SQLite backend: a connection (in a transaction the store opened).
pub(crate) struct SqliteSql<'c>(pub(crate) &'c rusqlite::Connection);

impl Sql for SqliteSql<'_> {
    fn batch(&mut self, sql: &str) -> Result<(), StoreError> {
        Ok(self.0.execute_batch(sql)?)
    }

    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64, StoreError> {
        let changed = self
            .0
            .prepare_cached(&sqlite_text(sql))?
            .execute(rusqlite::params_from_iter(params))?;
        Ok(u64::try_from(changed).unwrap_or(u64::MAX))
    }

    fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Row>, StoreError> {
        let mut rows = Vec::new();
        self.for_each(sql, params, &mut |row| {
            rows.push(row);
            Ok(())
        })?;
        Ok(rows)
    }

    fn for_each(
        &mut self,
        sql: &str,
        params: &[Value],
        each: &mut dyn FnMut(Row) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let mut stmt = self.0.prepare_cached(&sqlite_text(sql))?;
        let columns = stmt.column_count();
        let mut rows = stmt.query(rusqlite::params_from_iter(params))?;
        while let Some(row) = rows.next()? {
            each(sqlite_row(row, columns)?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dollar_parameters_become_sqlite_numbered_ones() {
        assert_eq!(
            sqlite_text("SELECT a FROM t WHERE b = $1 AND c = $12 AND d = '$'"),
            "SELECT a FROM t WHERE b = ?1 AND c = ?12 AND d = '$'"
        );
    }
}
