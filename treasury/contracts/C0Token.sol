// SPDX-License-Identifier: MIT
pragma solidity ^0.8.37;

import {MintableERC20} from "./MintableERC20.sol";

/// @title C0Token
/// @notice Yield-bearing test token `c0` with the decimals it is deployed with (18 on
///         our devnet by default, 6 as M0's extensions). Minters (the swap facility)
///         mint and burn; the owner may also mint (devnet faucet).
contract C0Token is MintableERC20 {
    constructor(uint8 decimals_) MintableERC20("c0 Yield Token", "c0", decimals_) {}

    /// @notice Burns `amount` of the caller's own balance. Minters only.
    function burn(uint256 amount) external {
        require(isMinter[msg.sender], "C0: caller is not a minter");
        _burn(msg.sender, amount);
    }
}
